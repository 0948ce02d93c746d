"""The use cases the command line calls: ``tune`` (the root: it wires study, engine, targets and
workers together), ``worker``, ``validate``, and the live view of a running study."""
