"""The optimisation engine: the only package that writes Optuna state.

One trial end to end (``trial``), its stored record (``record``), the loop that starts trials (``loop``),
storages and retries (``storage``), samplers, exploration after repeats, confirmation, and the public
evaluation entry point for any performance landscape (``landscape``)."""
