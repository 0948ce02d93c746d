"""An interrupted baseline's retry, queued behind the designed start, is the next trial asked for
until the baseline is measured (tuner/search/baseline.py ``baseline_runs_first``); Optuna's own
order is oldest first."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState

from tuner.search.baseline import baseline_runs_first
from tuner.store.keys import Key


def _study(tmp_path: Path) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")
    study.enqueue_trial({"x": 0}, user_attrs={Key.BASELINE: True})
    study.enqueue_trial({"x": 1})  # the designed start
    study.enqueue_trial({"x": 2})
    baseline = study.ask()
    study.tell(baseline, state=TrialState.FAIL)  # interrupted
    study.enqueue_trial({"x": 0}, user_attrs={Key.BASELINE: True, Key.RETRY_OF: 0})
    return study


def test_optuna_alone_asks_oldest_first(tmp_path: Path) -> None:
    # The premise: without the reordering the designed start would measure first and fix the
    # references.
    assert _study(tmp_path).ask().number == 1


def test_the_baseline_retry_is_asked_first_then_oldest_first(tmp_path: Path) -> None:
    study = _study(tmp_path)
    baseline_runs_first(study)
    retry = study.ask()
    assert retry.number == 3 and retry.suggest_int("x", 0, 2) == 0
    study.tell(retry, 1.0)
    # Measured: the queue's own order again.
    assert [study.ask().number for _ in range(2)] == [1, 2]
    assert study.ask().number == 4  # an empty queue: a fresh trial


def test_an_interrupted_retry_is_asked_first_again(tmp_path: Path) -> None:
    study = _study(tmp_path)
    baseline_runs_first(study)
    study.tell(study.ask(), state=TrialState.FAIL)
    study.enqueue_trial({"x": 0}, user_attrs={Key.BASELINE: True, Key.RETRY_OF: 3})
    assert study.ask().number == 4


def test_an_interrupted_trials_retry_is_asked_right_after_the_baseline(tmp_path: Path) -> None:
    """"Re-run on resume": the retry of an interrupted trial goes before the rest of the queue — a
    study that reached n_trials first left it waiting for good."""
    study = _study(tmp_path)
    baseline_runs_first(study)
    study.tell(study.ask(), 1.0)  # the baseline's retry, measured
    interrupted = study.ask()
    assert interrupted.number == 1
    study.tell(interrupted, state=TrialState.FAIL)
    study.enqueue_trial({"x": 1}, user_attrs={Key.RETRY_OF: 1})
    assert [study.ask().number for _ in range(2)] == [4, 2]  # the retry (4), then the queue
