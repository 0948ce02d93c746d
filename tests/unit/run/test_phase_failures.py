"""A phase that failed as a whole (``failure`` in its metrics, e.g. ``simulator-overloaded``):
measured again on the same server, then the trial ends FAIL ``phase-failed`` (the sampler is told
nothing), is queued again, and a run of them stops the study."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from objectives.overload import SIMULATOR_OVERLOADED
from tests.unit.run.test_trial import STUDY, FakeMeasurer
from tuner.query.ranking import TrialView
from tuner.run.confirm import confirm_top
from tuner.run.loop import MAX_PHASE_FAILURES, Limits, run_trials
from tuner.run.trial import PHASE_ATTEMPTS, TrialRunner
from tuner.search.baseline import enqueue_baseline
from tuner.sglang.options import load_option_table
from tuner.store.keys import Key, StudyKey
from tuner.store.record import Outcome, TrialRecord, measured_records
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace

OVERLOADED = {"failure": SIMULATOR_OVERLOADED,
              "failure_message": "the simulator gave up 0.40 s of its schedule"}


class Overloaded(FakeMeasurer):
    """C=64 fails as overloaded on its first ``failures`` attempts (all of them with None)."""

    def __init__(self, failures: int | None) -> None:
        super().__init__()
        self.failures = failures
        self.attempts = 0

    def measure(self, phase_index: int) -> Mapping[str, Any]:
        result = dict(super().measure(phase_index))
        if phase_index == 1:
            self.attempts += 1
            if self.failures is None or self.attempts <= self.failures:
                result.update(OVERLOADED)
        return result


def make(tmp_path: Path, measurer: FakeMeasurer) -> tuple[optuna.Study, TrialRunner]:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    path = tmp_path / "s.toml"
    path.write_text(STUDY)
    spec = load_study_file(path)
    space = SearchSpace(spec, load_option_table())
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    enqueue_baseline(study, space, spec)
    return study, TrialRunner(spec, space, measurer)


def test_a_phase_that_fails_once_is_measured_again_on_the_same_server(tmp_path: Path) -> None:
    measurer = Overloaded(failures=1)
    study, runner = make(tmp_path, measurer)
    study.optimize(runner, n_trials=1)
    trial = study.trials[0]
    assert measurer.deployed == [3] and measurer.measured == [(3, 0), (3, 1), (3, 1)]
    assert trial.state == TrialState.COMPLETE and trial.user_attrs[Key.OUTCOME] == "measured"
    # the second attempt's figures are stored
    assert "failure" not in trial.user_attrs[Key.PHASES]["64"]


def test_a_phase_that_keeps_failing_fails_the_trial_and_queues_it_again(tmp_path: Path) -> None:
    measurer = Overloaded(failures=PHASE_ATTEMPTS)
    study, runner = make(tmp_path, measurer)
    stopped = run_trials(study, runner,
                         Limits(n_trials=1, timeout_s=None, started=time.monotonic()),
                         "sqlite:///:memory:")
    assert stopped == "n_trials"
    failed, retry = study.trials[0], study.trials[1]
    assert failed.state == TrialState.FAIL and failed.value is None  # nothing for the sampler
    record = TrialRecord.from_stored(failed)
    assert record.outcome is Outcome.PHASE_FAILED and not record.is_measured
    assert record.failure_class == SIMULATOR_OVERLOADED
    assert record.failure \
           and record.failure.startswith(
               f"C=64 failed {PHASE_ATTEMPTS} times: the simulator gave up")
    assert record.metrics[64]["failure"] == SIMULATOR_OVERLOADED  # kept for inspection
    # queued again with the same flags (still the baseline), and measured then
    assert retry.user_attrs[Key.RETRY_OF] == 0 and retry.user_attrs.get(Key.BASELINE)
    assert retry.params == failed.params and retry.user_attrs[Key.OUTCOME] == "measured"
    assert measurer.measured == [(3, 0), (3, 1), (3, 1), (3, 0), (3, 1)]
    assert [r.number for r in measured_records(study)] == [1]
    # what `trials` and the report show
    ranked = TrialView(record, tuned={}, score=None, violations={})
    assert ranked.status == f"failed: {SIMULATOR_OVERLOADED}" \
           and ranked.failure == SIMULATOR_OVERLOADED


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_a_run_of_phase_failures_stops_the_study(tmp_path: Path) -> None:
    measurer = Overloaded(failures=None)
    study, runner = make(tmp_path, measurer)
    stopped = run_trials(study, runner,
                         Limits(n_trials=5, timeout_s=None, started=time.monotonic()),
                         "sqlite:///:memory:")
    assert stopped == "phase-failures"
    states = [t.state for t in study.trials if t.state != TrialState.WAITING]
    assert states == [TrialState.FAIL] * MAX_PHASE_FAILURES
    assert not measured_records(study)


def test_an_overloaded_confirmation_run_is_a_failed_run_not_a_figure(tmp_path: Path) -> None:
    measurer = Overloaded(failures=0)
    study, runner = make(tmp_path, measurer)
    study.optimize(runner, n_trials=1)  # the baseline, measured
    # the first fresh run's C=64 is overloaded, the second is not
    measurer.failures, measurer.attempts = 1, 0
    confirm_top(study, runner.spec, runner, measurer, top=1, repeats=2)
    entry = study.user_attrs[StudyKey.CONFIRMATION]["trials"]["0"]
    assert entry["failed"] == 1 and len(entry["runs"]) == 1
    assert "failure" not in entry["runs"][0]["64"]
