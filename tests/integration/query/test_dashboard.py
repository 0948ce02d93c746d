"""`spectune dashboard`: optuna-dashboard on the study's storage, infeasible trials shown as
infeasible.

optuna-dashboard 0.21 reads only the pre-Optuna-5 constraint list; without our storage view every
trial of a spectune study would come back with ``constraints: []`` and read as feasible.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import spectune_command
from tuner.query.answers import ranking_for
from tuner.query.dashboard import make_app
from tuner.query.load import open_stored_study

# A hang guard, not a speed goal: the fixture runs a short study first, which takes a minute on a
# busy machine.
pytestmark = pytest.mark.timeout(240)


def wsgi_get(app: Any, path: str) -> Any:
    from wsgiref.util import setup_testing_defaults

    environ: dict[str, Any] = {"PATH_INFO": path, "REQUEST_METHOD": "GET"}
    setup_testing_defaults(environ)
    status: list[str] = []
    body = b"".join(app(environ, lambda s, _h, _e=None: status.append(s)))
    assert status[0].startswith("200"), status
    return json.loads(body)


def check_study_detail(detail: dict[str, Any], stored_path: Path) -> None:
    stored = open_stored_study(stored_path)
    ranking = ranking_for(stored)
    shown = {t["number"]: t for t in detail["trials"]}
    assert len(shown) == len(ranking.trials)
    infeasible = [t for t in ranking.trials if t.state == "COMPLETE" and t.violations]
    assert infeasible, "the fixture has infeasible trials"
    for t in ranking.trials:
        constraints = shown[t.number]["constraints"]
        if t.state != "COMPLETE":
            continue
        assert len(constraints) == len(stored.study.trials[t.number].constraints) > 0
        assert any(v > 0 for v in constraints) == (t in infeasible), t.number
    # The dashboard's "best trial" is feasible, and is the study loop's best.
    assert [b["number"] for b in detail["best_trials"]] \
           == [ranking.best.number if ranking.best else None]
    # Nothing was written: the stored trials still have only Optuna 5's per-key constraints.
    assert all("constraints" not in t.system_attrs for t in stored.study.trials)


def served_detail(study: Path, *options: str) -> dict[str, Any]:
    """``spectune dashboard STUDY`` on a free port, asked over real HTTP for the study's detail and
    its page."""
    proc = subprocess.Popen([*spectune_command(), "dashboard", str(study), "--port", "0", *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.match(r"dashboard: (http://127\.0\.0\.1:\d+)/dashboard/studies/(\d+)", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        base, study_id = m.groups()
        with urllib.request.urlopen(f"{base}/api/studies/{study_id}", timeout=20) as response:
            detail: dict[str, Any] = json.load(response)
        with urllib.request.urlopen(f"{base}/dashboard", timeout=20) as response:
            assert response.status == 200 and b"<html" in response.read().lower()
        with urllib.request.urlopen(f"{base}/api/studies/{study_id}/param_importances",
                                    timeout=20) as response:
            assert response.status == 200 and "param_importances" in json.load(response)
    finally:
        proc.terminate()
        proc.wait(timeout=30)  # a loaded CI machine can take a while to unwind an interpreter
    return detail


def test_dashboard_command_serves_feasibility(stored_study: Path) -> None:
    check_study_detail(served_detail(stored_study), stored_study)


class _NeverStarts:
    """A server that never starts: the baseline fails to deploy, as on a host where the first start
    fails."""

    def deploy(self, config: Any) -> Any:
        from tuner.targets.base import DeployFailed

        raise DeployFailed("out-of-memory", "CUDA out of memory while loading the weights")

    def measure(self, phase_index: int) -> Any:
        raise AssertionError("never deployed")


def test_dashboard_answers_before_any_feasible_trial(tmp_path: Path) -> None:
    """Every real study spends its first trial with nothing feasible: the baseline's start failed
    and the next trial is still running. The dashboard serves the study then (no HTTP 500), with no
    best trial."""
    import optuna

    from tests.study_factory import write_study_file
    from tuner.evaluation.landscape import evaluate_search
    from tuner.store.storage import make_storage
    from tuner.study.load import load_study_file

    path = write_study_file(tmp_path, "early")
    spec = load_study_file(path)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = evaluate_search(spec, _NeverStarts(), n_trials=1, sampler="random",
                            storage=make_storage(spec.study.storage)).study
    study.ask()  # the next trial, still running
    detail = served_detail(path)
    assert detail["best_trials"] == []
    states = [t["state"] for t in detail["trials"]]
    assert states[0] == "Complete" and "Running" in states, states


def test_dashboard_app_on_sqlite(stored_study: Path) -> None:
    stored = open_stored_study(stored_study)
    detail = wsgi_get(make_app(stored), f"/api/studies/{stored.study._study_id}")
    check_study_detail(detail, stored_study)
