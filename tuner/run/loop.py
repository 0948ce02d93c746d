"""The study loop: start trials until the *study* (not this process) has enough measured ones.

One loop serves a lone tuner (SQLite) and each of several workers (PostgreSQL/MySQL). With several
workers:
- Asking is serialized by a study-wide gate (tuner/workers/leases.py ``Mutex``) held from before
  Optuna's ``ask`` until the proposed configuration is stored (``TrialEvents.on_proposed``). Every
  proposal then sees all trials in flight — TPE's constant liar and GPSampler's pending points keep
  parallel proposals apart — and the count of trials in flight is exact, so a study ends at
  ``n_trials`` measured, not ``n_trials + workers − 1``.
- A worker with nothing to start (the remaining trials are running elsewhere) polls. While it waits
  it fails stale trials of dead workers itself (Optuna does that only inside ``optimize``), and
  their re-queued copies (RetryHeartbeatStaleTrialCallback) are then run by whoever is free.
- The first measured trial sets the score's references (1.0 = the baseline, tuner/run/trial.py), so
  it runs alone.
"""

from __future__ import annotations

import enum
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import optuna
from optuna.trial import TrialState

from tuner.core import interrupts
from tuner.core.faults import fault_point
from tuner.run.trial import TrialRunner
from tuner.run.trial_events import ConfigTaken, PhaseFailed
from tuner.search.baseline import baseline_runs_first, keep_the_baseline
from tuner.search.explore import queue_unexplored_neighbour
from tuner.store.keys import StudyKey
from tuner.store.optuna_private import trial_id_of
from tuner.store.record import Outcome, TrialRecord, measured_records, records
from tuner.store.resilient import asked_trials, storage_failure
from tuner.store.score import stored_references
from tuner.store.storage import (
    has_retry,
    params_of,
    requeue_unretried,
    retry_attrs,
    with_storage_retries,
)

log = logging.getLogger(__name__)

#: Proposals in a row that cost nothing (duplicates, rejections) before we call the space exhausted.
MAX_FREE_PROPOSALS = 60
#: Trials in a row whose phase failed as a whole (e.g. simulator-overloaded) before the study stops
#: (``StopReason.PHASE_FAILURES``): the host, not the configurations, is the problem then, and the
#: tuner says so.
MAX_PHASE_FAILURES = 3
#: Configurations besides the baseline that failed to start or run, with nothing ever measured,
#: before the study stops (``StopReason.STARTS_FAILED``).
MAX_FAILED_STARTS = 3


class StopReason(enum.StrEnum):
    """Why ``run_trials`` returned (shown as ``stopped: …`` at the end of ``tune`` and
    ``worker``)."""

    N_TRIALS = "n_trials"  # the study has its measured trials (all workers together)
    TIMEOUT = "timeout"  # one more trial would likely run past this process's timeout
    EXHAUSTED = "exhausted"  # MAX_FREE_PROPOSALS proposals in a row measured nothing new
    # MAX_PHASE_FAILURES trials in a row failed a phase as a whole: the host
    PHASE_FAILURES = "phase-failures"
    #: The baseline — what the server runs today — failed to start and nothing was measured: the
    #: target cannot start the configuration its operator runs, so restarting others only repeats
    #: the failure.
    BASELINE_FAILED = "baseline-failed"
    #: MAX_FAILED_STARTS configurations besides the baseline failed to start or run and nothing
    #: was ever measured: the setup (model, GPUs, the command) is what fails, not the
    #: configurations.
    STARTS_FAILED = "starts-failed"


class Step(enum.Enum):
    """What one pass of the loop did, when it did not stop it."""

    RUN = "run"  # a trial ran (or its proposal cost nothing)
    WAIT = "wait"  # the remaining trials are in flight elsewhere, or the baseline is
    PHASE_FAILED = "phase-failed"  # the trial's phase failed as a whole; it is queued again


class Gate(Protocol):
    """What serializes asking across workers. ``release`` must be idempotent."""

    def acquire(self) -> None: ...

    def release(self) -> None: ...


class NoGate:
    """A lone tuner needs no gate."""

    def acquire(self) -> None:
        pass

    def release(self) -> None:
        pass


@dataclass(frozen=True)
class Limits:
    n_trials: int  # measured trials the study should reach (all workers together)
    timeout_s: float | None  # this process stops starting trials after this long
    started: float  # time.monotonic() when this process began
    #: Stop when the baseline fails to start and nothing was measured (a real target: the operator's
    #: own configuration does not start there). Off where the baseline is hypothetical (evaluating
    #: the search on a landscape, tuner/evaluation/landscape.py): the study goes on and scores
    #: against its first measured trial.
    stop_on_failed_baseline: bool = True


def run_trials(study: optuna.Study, runner: TrialRunner, limits: Limits, storage_url: str, *,
               gate: Gate | None = None,
               poll_s: float = 1.0, say: Callable[[str], None] | None = None,
               sleep: Callable[[float], None] = time.sleep) -> StopReason:
    """Run trials until the study has enough, time is up, the space is exhausted or the host keeps
    failing. ``gate`` must be released by ``runner`` once a trial's configuration is stored (pass
    ``gate.release`` as ``TrialEvents.on_proposed``)."""
    gate = gate or NoGate()
    baseline_runs_first(study)  # an interrupted baseline's retry runs before the designed start
    # A baseline that failed to start in an earlier run was reported then; a resumed study goes on
    # (the operator may have fixed the target) and scores against its first measured trial.
    trials = records(study)
    watch_baseline = limits.stop_on_failed_baseline and not baseline_failed(trials)
    # failed starts before this run: a fixed target resumes, earlier failures are not held
    # against it
    failed_before = len(failed_starts(trials))
    free_in_a_row = 0
    failed_in_a_row = 0
    waiting = False
    while True:
        # the N-th pass: N − 1 trials of this run ended, their server still up
        fault_point("between_trials")
        interrupts.check()
        before = len(measured_records(study))

        def step(free: int = free_in_a_row) -> Step | StopReason:
            gate.acquire()
            try:
                if not stored_references(study):
                    # never let another configuration define 1.0 silently
                    keep_the_baseline(study, runner.spec)
                decision = _decide(study, limits, free, watch_baseline=watch_baseline,
                                   failed_before=failed_before)
                if decision is Step.RUN:
                    # the trial defers signals from its bookkeeping to after tell
                    with interrupts.deferrable():
                        study.optimize(runner, n_trials=1, catch=(ConfigTaken, PhaseFailed))
                    interrupts.check()  # one that came meanwhile: now, with the trial stored
                    return _after_the_trial(study, runner)
                return decision
            finally:
                gate.release()

        try:
            decision = with_storage_retries(step, "running a trial", storage_url)
        except optuna.exceptions.UpdateFinishedTrialError:
            # This worker was silent past the grace period, so another one failed our trial as stale
            # and queued it again: its result is theirs to measure now.
            log.warning("trial %s was failed as stale by another worker; it will be re-run",
                        runner.current)
            continue
        except Exception:
            # Once the storage is given up on, Optuna turns the error into one of its own
            # (UnboundLocalError, "Should not reach."): the storage's own one-line reason is what
            # the user needs (exit 4).
            failure = storage_failure(study)
            if failure is not None:
                raise failure from None
            raise
        if decision is Step.WAIT:
            if not waiting and say is not None:
                say("waiting: the remaining trials are running on other workers")
            waiting = True
            # Optuna fails stale trials only inside optimize(); a waiting worker must do it, or a
            # dead worker's last trial would block everyone until the end.
            # Under the gate: failing a stale trial and Optuna's re-queue of it are two writes, and
            # a worker's start-up ``requeue_unretried`` between them would queue the same trial a
            # second time.
            gate.acquire()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    optuna.storages.fail_stale_trials(study)
            finally:
                gate.release()
            sleep(poll_s)
            continue
        waiting = False
        if decision is Step.PHASE_FAILED:
            failed_in_a_row += 1
            if failed_in_a_row >= MAX_PHASE_FAILURES:
                return StopReason.PHASE_FAILURES
            continue
        failed_in_a_row = 0
        if isinstance(decision, StopReason):
            return decision
        free_in_a_row = 0 if len(measured_records(study)) > before else free_in_a_row + 1


def _after_the_trial(study: optuna.Study, runner: TrialRunner) -> Step:
    """What the trial just run calls for, from its stored record (read once): a phase that failed
    as a whole is measured again later (at most MAX_RETRIES times); a proposal that repeated a
    measured configuration is followed by an unmeasured neighbour of it
    (tuner/search/explore.py), so a converged sampler keeps learning instead of exhausting the
    study."""
    if runner.current is None:
        return Step.RUN
    trial = study.get_trials(deepcopy=False)[runner.current]
    outcome = TrialRecord.from_stored(trial).outcome
    if outcome is Outcome.PHASE_FAILED:
        requeue_unretried(study)
        return Step.PHASE_FAILED
    if outcome is Outcome.DUPLICATE:
        queue_unexplored_neighbour(study, runner.space, trial, runner.spec.study.seed)
    return Step.RUN


def _decide(study: optuna.Study, limits: Limits, free_in_a_row: int, *, watch_baseline: bool = True,
            failed_before: int = 0) -> Step | StopReason:
    trials = records(study)
    measured = [t for t in trials if t.is_measured]
    if len(measured) >= limits.n_trials:
        return StopReason.N_TRIALS
    if limits.timeout_s is not None and out_of_time(measured, limits.started, limits.timeout_s):
        return StopReason.TIMEOUT
    if free_in_a_row >= MAX_FREE_PROPOSALS:
        return StopReason.EXHAUSTED
    if watch_baseline and baseline_failed(trials):
        return StopReason.BASELINE_FAILED
    if limits.stop_on_failed_baseline and starts_failed(trials, failed_before):
        return StopReason.STARTS_FAILED
    running = sum(t.state == TrialState.RUNNING for t in trials)
    if len(measured) + running >= limits.n_trials:
        return Step.WAIT  # the last trials are in flight; one may still fail or turn out free
    if running and not stored_references(study):
        return Step.WAIT  # the first measurement (the baseline) fixes what a score of 1.0 means
    return Step.RUN


def baseline_failed(trials: list[TrialRecord]) -> bool:
    """The baseline's start failed and no trial has been benchmarked (nothing to compare with, and
    the target cannot start what its operator runs)."""
    failed = any(t.baseline and t.outcome is Outcome.DEPLOY_FAILED for t in trials)
    return failed and not any(t.outcome is Outcome.MEASURED for t in trials)


_FAILING = (Outcome.DEPLOY_FAILED, Outcome.RUN_FAILED)


def failed_starts(trials: list[TrialRecord]) -> list[TrialRecord]:
    """The configurations besides the baseline that failed to start or run."""
    return [t for t in trials if t.outcome in _FAILING and not t.baseline]


def starts_failed(trials: list[TrialRecord], failed_before: int) -> bool:
    """The baseline failed to start or run, nothing was ever benchmarked, and MAX_FAILED_STARTS
    other configurations failed in this run (beyond the ``failed_before`` it began with): the run
    that resumed after the baseline's failure ends here instead of restarting until n_trials."""
    if any(t.outcome is Outcome.MEASURED for t in trials) or not any(
            t.baseline and t.outcome in _FAILING for t in trials):
        return False
    return len(failed_starts(trials)) - failed_before >= MAX_FAILED_STARTS


def out_of_time(measured: list[TrialRecord], started: float, timeout_s: float) -> bool:
    """Stop when one more trial would likely run past the timeout (Optuna only checks between
    trials)."""
    elapsed = time.monotonic() - started
    durations = [t.duration_s for t in measured[-5:] if t.duration_s is not None]
    margin = max(durations) if durations else 0.0
    return elapsed + margin >= timeout_s


def requeue_interrupted(study: optuna.Study, number: int | None) -> None:
    """The trial an interruption hit is FAIL now (Optuna records it): queue its parameters again, so
    the resume — or, on a shared study, any other worker at once — measures it. A trial this process
    had just asked for (the interrupt landed inside Optuna's ``ask``, before the objective ran) is
    still RUNNING: it is failed here, or it would wait for a heartbeat that never comes.

    Enqueue first, mark after: a kill between the two leaves a retry (and ``requeue_unretried`` on
    the next start finds any FAIL trial that has none)."""
    trials = study.get_trials(deepcopy=False)
    numbers = {t.number for t in trials
               if trial_id_of(t) in asked_trials(study) and t.state == TrialState.RUNNING}
    if number is not None:
        numbers.add(number)
    for n in sorted(numbers):
        trial = trials[n]
        if trial.state == TrialState.RUNNING:
            study.tell(n, state=TrialState.FAIL)
        elif trial.state != TrialState.FAIL:
            continue
        fault_point("before_requeue")
        if params_of(trial) and not has_retry(trials, n):
            study.enqueue_trial(params_of(trial), user_attrs=retry_attrs(trial))
        study.set_user_attr(StudyKey.interrupted(n), True)
