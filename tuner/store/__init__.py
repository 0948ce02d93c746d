"""Trial records, their scores and references, and the storages they live in (retries, opening, the
study fingerprint, Optuna's private API behind one adapter)."""
