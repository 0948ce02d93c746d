"""`spectune dashboard`: optuna-dashboard on the study's storage, infeasible trials shown as infeasible.

optuna-dashboard 0.21 reads only the pre-Optuna-5 constraint list; without our storage view every trial of a
spectune study would come back with ``constraints: []`` and read as feasible.
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

# A hang guard, not a speed goal: the fixture runs a short study first, which takes a minute on a busy machine.
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
    assert [b["number"] for b in detail["best_trials"]] == [ranking.best.number if ranking.best else None]
    # Nothing was written: the stored trials still have only Optuna 5's per-key constraints.
    assert all("constraints" not in t.system_attrs for t in stored.study.trials)


def test_dashboard_command_serves_feasibility(stored_study: Path) -> None:
    proc = subprocess.Popen([*spectune_command(), "dashboard", str(stored_study), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.match(r"dashboard: (http://127\.0\.0\.1:\d+)/dashboard/studies/(\d+)", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        base, study_id = m.groups()
        with urllib.request.urlopen(f"{base}/api/studies/{study_id}", timeout=20) as response:
            detail = json.load(response)
        with urllib.request.urlopen(f"{base}/dashboard", timeout=20) as response:
            assert response.status == 200 and b"<html" in response.read().lower()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    check_study_detail(detail, stored_study)


def test_dashboard_app_on_sqlite(stored_study: Path) -> None:
    stored = open_stored_study(stored_study)
    detail = wsgi_get(make_app(stored), f"/api/studies/{stored.study._study_id}")
    check_study_detail(detail, stored_study)
