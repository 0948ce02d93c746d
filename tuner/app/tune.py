"""``spectune tune``: run a study to its end, resumably.

Exit codes (docs/study.md): 0 done; 2 bad study file; 3 target unreachable after retries; 4 storage
failing after retries; 5 study busy (another tuner holds the SQLite file); 130 interrupted by
Ctrl-C; 143 by SIGTERM. An interrupted trial is recorded as FAIL with ``interrupted`` and its
parameters queued again, so the next run re-measures it; the target is left as ``[finish]`` says in
every case.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from rich.console import Console

from tuner.app.preflight import run_preflight
from tuner.app.progress import LiveView
from tuner.core import interrupts
from tuner.core.console import make_console
from tuner.core.defaults import DEFAULT_REPEATS, DEFAULT_TOP
from tuner.core.errors import Interrupted, SpectuneError
from tuner.core.faults import fault_point
from tuner.core.interrupts import deferred, interruptible, silence_tracebacks
from tuner.run.confirm import RULE, Verdict, confirm_top, runs_planned
from tuner.run.loop import Gate, Limits, NoGate, StopReason, requeue_interrupted, run_trials
from tuner.run.setup import Objectives, adopt, study_sampler
from tuner.run.trial import TrialRunner
from tuner.run.trial_events import ConfigTaken, TrialEvents
from tuner.search.baseline import enqueue_baseline
from tuner.sglang.launch import launch_command
from tuner.sglang.versions import respelled
from tuner.store.keys import StudyKey
from tuner.store.record import Outcome, TrialRecord, best_record, measured_records, records
from tuner.store.resilient import storage_failure
from tuner.store.storage import (
    CONNECT_TIMEOUT_S,
    StorageUnavailable,
    is_server_database,
    open_study,
    recover_interrupted,
    redact,
    requeue_unretried,
    study_lock,
)
from tuner.study.hosts import hosts_of, spec_for_host
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec
from tuner.targets.base import Target, TargetUnavailable
from tuner.workers.coordination import shared_study
from tuner.workers.leased import LeasedTarget
from tuner.workers.leases import LeaseLost


@dataclass(frozen=True)
class TuneOutcome:
    study_name: str
    measured: int
    stopped_by: StopReason
    best: TrialRecord | None
    best_command: str | None
    verdict: Verdict | None = None  # the confirmation stage's winner rule (None: not run)
    # the measured baseline trial: what the answer is compared with
    baseline: TrialRecord | None = None
    logs: Path | None = None  # where the servers' logs went (the folder of the trials' log files)
    # of ``measured``, how many ran the benchmark (not a failed start or run)
    benchmarked: int | None = None

    def why_nothing_measured(self) -> str | None:
        """Why no trial of the study ran its benchmark (exit 7), or None when one did."""
        if (self.measured if self.benchmarked is None else self.benchmarked) != 0:
            return None
        if self.stopped_by is StopReason.BASELINE_FAILED:
            return "the baseline failed to start or to run, and the study stopped there"
        if self.stopped_by is StopReason.STARTS_FAILED:
            return ("every configuration tried failed to start or run, and the study stopped: the "
                    "setup (model, GPUs, the server command) is what fails")
        if self.measured:
            return "every start or run failed"
        return f"no configuration was deployed (stopped: {self.stopped_by})"

    def counts_text(self) -> str:
        """``12 measured trials``, or what the trials that used the server came to when some did not
        measure."""
        done = self.measured if self.benchmarked is None else self.benchmarked
        if done == self.measured:
            return f"{self.measured} measured trials"
        if done == 0:
            return (f"{self.measured} trial(s) used the server, none measured: every start or run "
                    "failed")
        return (f"{self.measured} trials used the server, {done} measured ({self.measured - done} "
                "failed)")


# Optuna logs every exception that ends a trial with its traceback; these are expected endings.
silence_tracebacks("optuna.study._optimize", KeyboardInterrupt, TargetUnavailable, ConfigTaken,
                   LeaseLost)
# SQLAlchemy logs, through its pool's logger, the error of closing a cursor that an interrupt cut
# short.
for _pool in ("QueuePool", "NullPool", "SingletonThreadPool", "StaticPool",
              "AsyncAdaptedQueuePool"):
    silence_tracebacks(f"sqlalchemy.pool.impl.{_pool}", Interrupted, KeyboardInterrupt)


def run_study(spec: StudySpec, *, n_trials: int | None = None, timeout_s: float | None = None,
              console: Console | None = None, target: Target | None = None,
              confirm: int = DEFAULT_TOP,
              repeats: int = DEFAULT_REPEATS, host: str | None = None) -> TuneOutcome:
    """Run the study to its end from this process. On a server database this process is one worker
    among any number (tuner/app/worker.py): it leases ``host`` (default: the first free host) and
    shares the trial count."""
    console = console or make_console(stderr=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n_trials = n_trials or spec.study.n_trials
    timeout_s = timeout_s if timeout_s is not None else spec.study.timeout_s
    table = spec.option_table
    space = SearchSpace(spec, table)
    objectives = Objectives.of(spec)
    shared = is_server_database(spec.study.storage)

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    # before the lease table and the study: both connect, and a dead server must not look like a
    # hang
    if shared:
        say(f"connecting to {redact(spec.study.storage)} … (up to {CONNECT_TIMEOUT_S} s per "
            "attempt)")
    with study_lock(spec.study.storage), ExitStack() as stack:
        team = stack.enter_context(shared_study(spec, host, say=say)) if shared else None
        host = team.host if team else (host or hosts_of(spec)[0])
        # Workers seeded alike would make the same random start-up proposals in lockstep.
        seed = worker_seed(spec.study.seed, host) if team else spec.study.seed
        study = open_study(spec.study.storage, spec.study.name, study_sampler(spec, space, seed),
                           objectives.directions, objectives.metric_names,
                           heartbeat_interval_s=spec.study.heartbeat_interval_s,
                           heartbeat_grace_s=spec.study.heartbeat_grace_s, say=say, announce=False)
        # Refuse to mix trials of a changed study file (tuner/store/fingerprint.py); a changed
        # [objective] only re-ranks, and the answer below is then taken from a re-ranking of the
        # stored metrics.
        reranked = adopt(study, spec)
        if reranked:
            say(reranked)
        gate: Gate = NoGate()
        if team:
            gate = team.ask
            say(f"worker {team.holder} on host {host}")
            # check-and-enqueue under a lock: the baseline runs once per study
            with team.baseline.held():
                enqueue_baseline(study, space, spec)
            # A worker killed between an interrupted trial's FAIL and its re-queue. Under the ask
            # gate: a waiting worker fails stale trials and Optuna re-queues them under it too, and
            # a FAIL seen between those two steps would otherwise be queued twice (one copy left
            # waiting when the study ends).
            with team.ask.held():
                requeue_unretried(study)
        else:
            recovered = recover_interrupted(study)
            if recovered:
                say(f"resuming: trial(s) {', '.join(map(str, recovered))} were interrupted and "
                    "will be re-run")
            enqueue_baseline(study, space, spec)
        if target is None:
            from tuner.study.target import make_target

            target = make_target(spec_for_host(spec, host))
        if team:
            target = LeasedTarget(target, team.keeper)
        started = time.monotonic()
        runner: TrialRunner | None = None
        finished = False
        try:
            # from the preflight on: an interrupt anywhere ends in one line and a restore
            with interruptible():
                checked = run_preflight(target, spec, space, say, study)
                table = checked.table or table
                # the target's SGLang judges what it refuses while loading
                if checked.installed is not None:
                    space = SearchSpace(spec, space.table, loading=False)
                if (installed := target.installed_sglang()) is not None:
                    study.set_user_attr(StudyKey.SGLANG_VERSION, installed)
                stored = measured_records(study)
                stored_best = None if objectives.pareto else best_record(study)
                if team and confirm:  # one worker among many cannot interleave the others' hosts
                    say("confirmation is skipped on a shared study: run `spectune tune` alone "
                        "afterwards to confirm")
                    confirm = 0
                if objectives.pareto:
                    confirm = 0
                with LiveView(console, n_trials, len(stored), extra=runs_planned(confirm, repeats),
                              best=stored_best.score if stored_best else None,
                              durations=[r.duration_s for r in stored if r.duration_s]) as view:
                    from tuner.run.measure import TargetMeasurer

                    measurer = TargetMeasurer(target, spec.benchmark, progress=view.on_phase,
                                              say=say)
                    runner = TrialRunner(spec, space, measurer,
                                         TrialEvents(view.on_stage, view.on_done, gate.release,
                                                     view.on_deploy),
                                         host=host if team else None)
                    stopped_by = run_trials(study, runner, Limits(n_trials, timeout_s, started),
                                            spec.study.storage, gate=gate, say=say,
                                            poll_s=min(max(spec.study.heartbeat_interval_s / 2,
                                                           0.5), 10.0))
                    verdict = _confirm(study, spec, runner, measurer, confirm, repeats, say,
                                       view.on_confirm)
                best = None if objectives.pareto else _best(study, spec, reranked=bool(reranked))
                if verdict is not None:
                    best = next(r for r in records(study) if r.number == verdict.winner)
                with deferred():  # a signal now is answered once the target is as [finish] says
                    fault_point("final_finish")
                    command = _finish(spec, target, best, table, console)
                    finished = True
                interrupts.check()
        except LeaseLost:
            with deferred():
                requeue_interrupted(study, runner.current if runner else None)
            raise  # the host belongs to another worker now: leave it alone
        # an interrupt, the target or storage gone, a bug: the target is left as it says
        except BaseException:
            with deferred():  # a second signal must not cut the restore short
                _clean_up(study, spec, target, runner, table, console, pareto=objectives.pareto,
                          restore=not finished)
            raise
        finally:
            target.close()
    measured = measured_records(study)
    baseline = next((r for r in measured if r.baseline and r.metrics), None)
    logs = next((Path(r.log).parent for r in reversed(measured) if r.log), None)
    benchmarked = sum(1 for r in measured if r.outcome is Outcome.MEASURED)
    return TuneOutcome(spec.study.name, len(measured), stopped_by, best, command, verdict, baseline,
                       logs, benchmarked)


def _best(study: optuna.Study, spec: StudySpec, *, reranked: bool) -> TrialRecord | None:
    """The study's best. After a change to [objective] the stored scores of older trials were
    computed under the old weights, so the best is re-ranked from every trial's raw metrics under
    the current objective."""
    if not reranked:
        return best_record(study)
    from tuner.query.ranking import rank

    winner = rank(study, spec, constraints=spec.objective.constraints).best
    return winner.record if winner is not None else None


def _clean_up(study: optuna.Study, spec: StudySpec, target: Target, runner: TrialRunner | None,
              table: Any, console: Console, *, pareto: bool, restore: bool) -> None:
    """After an interrupt or a failure: record the trial it hit and leave the target as [finish]
    says. With the storage down the trial stays RUNNING (the next start re-queues it) and the best
    is unknown: restore."""
    fault_point("cleanup")
    best = None
    if storage_failure(study) is None:
        try:
            requeue_interrupted(study, runner.current if runner else None)
            best = None if pareto else best_record(study)
        except StorageUnavailable:
            pass
        # the restore below matters more than this record (a resume re-queues it)
        except Exception as exc:
            console.print(f"could not record the interrupted trial: {exc}", markup=False)
    if not restore:
        return
    try:
        _finish(spec, target, best, table, console, quiet=True)
    except SpectuneError as exc:  # e.g. the host is still unreachable: say so, keep the first error
        console.print(f"could not leave the target as [finish] says: {exc}", markup=False)


def worker_seed(seed: int | None, host: str) -> int | None:
    """A seed of its own for the worker on ``host``: reproducible per host, different between
    hosts."""
    return None if seed is None else (seed * 1_000_003 + zlib.crc32(host.encode())) % 2**32


def _confirm(study: optuna.Study, spec: StudySpec, runner: TrialRunner, measurer: Any, top: int,
             repeats: int,
             say: Callable[[str], None], on_run: Callable[[int, int], None]) -> Verdict | None:
    if top <= 0:
        return None
    from tuner.run.confirm import plan

    # no candidate besides the baseline (every other start failed, or none ran)
    if not plan(study, top)[0]:
        say("confirmation: skipped — no measured candidate besides the baseline to confirm")
        return None
    say(f"confirmation: the top {top} and the baseline, {repeats} fresh restart(s) each, "
        "interleaved")
    verdict = confirm_top(study, spec, runner, measurer, top=top, repeats=repeats, on_run=on_run)
    scorer = runner.scorer(study)
    for record in records(study):
        if record.confirmed is None:
            continue
        interval = scorer.interval(record.confirmed.pooled) if record.confirmed.runs else None
        figure = f"{interval.mid:.3f} {interval.text()}" if interval else "–"
        study_score = f"{record.score:.3f}" if record.score is not None else "–"
        say(f"  trial {record.number}{' (baseline)' if record.baseline else ''}: study score "
            f"{study_score}, confirmed {figure} over {len(record.confirmed.runs)} run(s)"
            + (f", {record.confirmed.failed} failed" if record.confirmed.failed else ""))
    if verdict is not None:
        say(f"winner rule ({RULE}): {verdict.explain()}")
    return verdict


def _finish(spec: StudySpec, target: Target, best: TrialRecord | None, table: Any, console: Console,
            *, quiet: bool = False) -> str | None:
    """Leave the target as [finish] says and return the best launch command."""
    command = None
    config = best.config if best is not None else None
    if config is not None:
        prefix = spec.target.settings.launch_prefix() or ("python3", "-m", "sglang.launch_server")
        command = launch_command(prefix, respelled(config, table), table).shell(multiline=True)
    if spec.finish == "best" and config is not None:
        if not quiet:
            console.print(
                f"deploying the best configuration (trial {best.number if best else '?'})",
                markup=False)
        target.deploy(config)
    elif spec.finish == "original" or (spec.finish == "best" and config is None):
        target.restore()
    return command
