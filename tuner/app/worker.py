"""``spectune worker STUDY [--host H]``: one of several processes working on one study, one per
host.

A worker is ``run_study`` on a shared study: it leases its host in the study's database, runs trials
until the study (all workers together) has ``n_trials`` measured ones, and leaves its host as
``[finish]`` says. How the workers stay out of each other's way is in tuner/workers/coordination.py
(hosts, baseline) and tuner/run/loop.py (asking, counting, dead workers' trials); docs/scaling.md is
the user's view.
"""

from __future__ import annotations

from rich.console import Console

from tuner.app.tune import TuneOutcome, run_study
from tuner.core.errors import SpectuneError
from tuner.store.storage import is_server_database, redact
from tuner.study.hosts import check_host
from tuner.study.spec import StudySpec


class NeedsServerDatabase(SpectuneError):
    exit_code = 2


def run_worker(spec: StudySpec, host: str | None, *, n_trials: int | None = None,
               timeout_s: float | None = None, console: Console | None = None) -> TuneOutcome:
    if not is_server_database(spec.study.storage):
        # SQLite cannot hand out queued trials to several processes safely (optuna-5.0-notes §2):
        # refuse before anything is opened, rather than let workers collide on the lock file one by
        # one.
        raise NeedsServerDatabase(
            f"workers share a study through PostgreSQL or MySQL; {spec.path} stores it in "
            f"{redact(spec.study.storage)} (SQLite: run one `spectune tune` "
            "instead, or set [study] storage = \"postgresql+psycopg://…\")")
    if host is not None:
        check_host(spec, host)
    return run_study(spec, n_trials=n_trials, timeout_s=timeout_s, console=console, host=host)
