"""Kills and signals at named code points of ``spectune tune`` (SQLite, the simulated target).

Each case runs the tuner with one fault (tuner/core/faults.py), checks how that run ended — SIGKILL:
dead; a signal: exit 130/143 and one line — and that no server of the study is left, then resumes
the study and checks that it ends whole: n_trials measured, nothing counted twice, nothing RUNNING,
the baseline measured as 1.0. The signal matrix (every stage, once and twice, without the resume):
test_signals.py.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tests.faults.conftest import (
    assert_one_line,
    assert_resumes_whole,
    finish,
    make_study,
    study_name,
    tune,
    wait_gone,
)
from tuner.core.net import free_port
from tuner.store.keys import Key, StudyKey

N = 3

KILLS = {
    # The sampler's proposal, before the objective ran: the trial is RUNNING without a heartbeat.
    "after_ask": "after_ask@2:kill",
    # A server spawned, its pid file not yet written (issue 12 item 4): the resume must stop it, not
    # meet "port already in use".
    "after_spawn": "after_spawn@2:kill",
    # The baseline queued, the study not yet marked as having one (item 6).
    "after_baseline_enqueue": "after_baseline_enqueue:kill",
    # The baseline's references written, its result not yet (item 6): 1.0 must come from a stored
    # measurement — the baseline's retry runs before the designed start queued ahead of it
    # (``baseline_runs_first``).
    "between_references": "between_references:kill",
    # An interrupted trial FAIL, its parameters not yet queued again (item 6).
    "before_requeue": "after_spawn@2:term,before_requeue:kill",
}


@pytest.mark.fault("kill_points")
@pytest.mark.parametrize("case", sorted(KILLS))
def test_kill_at_a_named_point_then_resume(tmp_path: Path, case: str) -> None:
    study = make_study(tmp_path, f"fault-kill-{case}", n_trials=N, port=free_port())
    code, err = finish(tune(study, KILLS[case]))
    assert code == -9, err
    s = assert_resumes_whole(study, N)
    baseline = s.trials[0]
    assert baseline.user_attrs.get(Key.BASELINE) is True
    scored = [t for t in s.trials
              if t.user_attrs.get(Key.BASELINE) and t.state == optuna.trial.TrialState.COMPLETE]
    assert scored and scored[0].user_attrs[Key.SCORE] == pytest.approx(1.0), \
           "1.0 is not the baseline"
    owner = s.user_attrs.get(StudyKey.REFERENCES_TRIAL)
    assert owner is not None and s.trials[owner].state == optuna.trial.TrialState.COMPLETE
    assert s.trials[owner].user_attrs.get(Key.BASELINE) is True


@pytest.mark.fault("signals")
def test_a_signal_inside_ask_then_resume(tmp_path: Path) -> None:
    """A SIGTERM inside Optuna's ``ask`` (the trial RUNNING, its objective not started), then a
    resume that ends the study whole. Signals at every other stage, once and twice:
    test_signals.py."""
    study = make_study(tmp_path, "fault-sig-after_ask", n_trials=N)
    code, err = finish(tune(study, "after_ask@2:term"))
    assert code == 143, err
    assert_one_line(err, contains="interrupted by SIGTERM")
    assert wait_gone(study_name(study)) == []
    assert_resumes_whole(study, N)
