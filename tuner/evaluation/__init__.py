"""Evaluating a search on a performance landscape without servers: the public landscape API, the
reference searches (random, one-flag sweep) and the cost model."""
