"""Asking a stored study: re-ranking under any weights and constraints, trial tables, exports, the
dashboard.

Everything here only reads the study (the dashboard's own write actions aside): raw metrics are
stored on every trial, so a new ranking never re-runs anything. Modules: ``load`` (open a study
read-only, with clear errors), ``options`` (``--weights``/``--constraint`` text), ``ranking``
(scores and feasibility per trial), ``table`` (the ``trials`` table), ``export`` (the winner as a
command, a systemd drop-in or JSON), ``dashboard`` (optuna-dashboard with constraints it can show),
``fingerprint`` (a study file changed since the study began).
"""
