"""A phase whose server crashed, hung or failed a burst of requests (``failure`` crashed-under-load
/ hung): the trial ends COMPLETE ``run-failed``, infeasible, with its class, cause and evidence; it
counts, is not measured again on the same server, is not queued again, and is never a candidate —
unlike the machine's own ``simulator-overloaded``, which stays queued again."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from optuna.trial import TrialState

from tests.unit.run.test_phase_failures import make
from tests.unit.run.test_trial import FakeMeasurer
from tuner.query.ranking import TrialView
from tuner.run.loop import Limits, run_trials
from tuner.store.keys import Key
from tuner.store.record import Outcome, TrialRecord, best_record
from tuner.targets.base import FailureCause

CRASH = {"failure": "crashed-under-load",
         "failure_message": "the server exited with code 1 at C=64", "failure_cause": "decode-oom",
         "run_failure": {"phase": "c64", "concurrency": 64, "exit": "exited with code 1"},
         "log_tail": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
         "error_rate": 0.5}


class Crashing(FakeMeasurer):
    """Every trial's C=64 phase crashes (the baseline's too, here: what is stored is the point)."""

    def __init__(self) -> None:
        super().__init__()
        self.c64_attempts = 0

    def measure(self, phase_index: int) -> Mapping[str, Any]:
        result = dict(super().measure(phase_index))
        if phase_index == 1:
            self.c64_attempts += 1
            result.update(CRASH)
        return result


def test_a_crash_under_load_is_stored_infeasible_with_its_evidence_and_not_queued_again(
        tmp_path: Path) -> None:
    measurer = Crashing()
    study, runner = make(tmp_path, measurer)
    stopped = run_trials(study, runner,
                         Limits(n_trials=2, timeout_s=None, started=time.monotonic()),
                         "sqlite:///:memory:")
    assert stopped == "n_trials"
    # one attempt per trial, no retry, no re-queue
    assert len(study.trials) == 2 and measurer.c64_attempts == 2
    for trial in study.trials:
        assert trial.state == TrialState.COMPLETE
        record = TrialRecord.from_stored(trial)
        assert record.outcome is Outcome.RUN_FAILED and record.is_measured \
               and not record.is_candidate
        assert not record.feasible and record.failure_class == "crashed-under-load"
        assert record.failure_cause is FailureCause.DECODE_OOM
        assert record.run_failure == CRASH["run_failure"]
        assert record.log_tail and "OutOfMemoryError" in record.log_tail
        assert record.metrics[64]["error_rate"] == 0.5 and "run_failure" not in record.metrics[64]
        assert Key.RETRY_OF not in trial.user_attrs
        view = TrialView(record=record, tuned={}, score=None, violations={}, interval=None)
        assert view.status == "failed: crashed-under-load" and view.failure == "crashed-under-load"
    assert best_record(study) is None
