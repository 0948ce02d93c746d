"""``spectune tune``: run a study to its end, resumably.

Exit codes (docs/study.md): 0 done; 2 bad study file; 3 target unreachable after retries; 4 storage failing
after retries; 5 study busy (another tuner holds the SQLite file); 130 interrupted by Ctrl-C; 143 by SIGTERM.
An interrupted trial is recorded as FAIL with ``interrupted`` and its parameters queued again, so the next run
re-measures it; the target is left as ``[finish]`` says in every case.
"""

from __future__ import annotations

import time
import zlib
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import optuna
from rich.console import Console

from tuner.app.progress import LiveView
from tuner.core.errors import Interrupted, SpectuneError
from tuner.core.interrupts import interruptible, silence_tracebacks
from tuner.engine.baseline import enqueue_baseline
from tuner.engine.confirm import Confirmation, confirm_top, confirmed_winner
from tuner.engine.fingerprint import record_or_check
from tuner.engine.loop import Gate, Limits, NoGate, requeue_interrupted, run_trials
from tuner.engine.record import StudyKey, TrialRecord, best_record, measured_records
from tuner.engine.samplers import make_sampler, resolve_sampler_name
from tuner.engine.storage import is_server_database, open_study, recover_interrupted, study_lock
from tuner.engine.trial import ConfigTaken, TrialEvents, TrialRunner
from tuner.sglang.launch import launch_command
from tuner.sglang.options import load_option_table
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec
from tuner.targets.base import Target, TargetUnavailable
from tuner.targets.hosts import hosts_of, spec_for_host
from tuner.workers.coordination import shared_study
from tuner.workers.leased import LeasedTarget
from tuner.workers.leases import LeaseLost


@dataclass(frozen=True)
class TuneOutcome:
    study_name: str
    measured: int
    stopped_by: str  # n_trials | timeout | exhausted
    best: TrialRecord | None
    best_command: str | None


# Optuna logs every exception that ends a trial with its traceback; these are expected endings.
silence_tracebacks("optuna.study._optimize", KeyboardInterrupt, TargetUnavailable, ConfigTaken, LeaseLost)


def run_study(spec: StudySpec, *, n_trials: int | None = None, timeout_s: float | None = None,
              console: Console | None = None, target: Target | None = None, confirm: int = 0,
              repeats: int = 3, host: str | None = None) -> TuneOutcome:
    """Run the study to its end from this process. On a server database this process is one worker among any
    number (tuner/app/worker.py): it leases ``host`` (default: the first free host) and shares the trial count."""
    console = console or Console(stderr=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n_trials = n_trials or spec.study.n_trials
    timeout_s = timeout_s if timeout_s is not None else spec.study.timeout_s
    table = load_option_table(spec.study.sglang_version)
    space = SearchSpace(spec, table)
    pareto = spec.objective.mode == "pareto"
    directions = ["maximize", "maximize"] if pareto else ["maximize"]
    metric_names = ([f"c{c}_tok_s" for c in sorted(spec.objective.weights)] if pareto else ["score"])
    shared = is_server_database(spec.study.storage)

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    with study_lock(spec.study.storage), ExitStack() as stack:
        team = stack.enter_context(shared_study(spec, host, say=say)) if shared else None
        host = team.host if team else (host or hosts_of(spec)[0])
        # Workers seeded alike would make the same random start-up proposals in lockstep.
        seed = worker_seed(spec.study.seed, host) if team else spec.study.seed
        sampler = make_sampler(spec.study.sampler, seed, multi_objective=pareto)
        study = open_study(spec.study.storage, spec.study.name, sampler, directions, metric_names,
                           heartbeat_interval_s=spec.study.heartbeat_interval_s,
                           heartbeat_grace_s=spec.study.heartbeat_grace_s)
        record_or_check(study, spec)  # refuse to mix trials of a changed study file (tuner/engine/fingerprint.py)
        study.set_user_attr(StudyKey.SAMPLER, resolve_sampler_name(spec.study.sampler))
        gate: Gate = NoGate()
        if team:
            gate = team.ask
            say(f"worker {team.holder} on host {host}")
            with team.baseline.held():  # check-and-enqueue under a lock: the baseline runs once per study
                enqueue_baseline(study, space, spec)
        else:
            recovered = recover_interrupted(study)
            if recovered:
                say(f"resuming: trial(s) {', '.join(map(str, recovered))} were interrupted and will be re-run")
            enqueue_baseline(study, space, spec)
        if target is None:
            from tuner.targets import make_target

            target = make_target(spec_for_host(spec, host))
        if team:
            target = LeasedTarget(target, team.keeper)
        started = time.monotonic()
        runner: TrialRunner | None = None
        try:
            with interruptible():  # from the preflight on: an interrupt anywhere ends in one line and a restore
                target.preflight(space.emittable_flags())
                if (installed := target.installed_sglang()) is not None:
                    study.set_user_attr(StudyKey.SGLANG_VERSION, installed)
                already = len(measured_records(study))
                with LiveView(console, n_trials, already) as view:
                    from tuner.engine.measure import TargetMeasurer

                    measurer = TargetMeasurer(target, spec.benchmark, progress=view.on_phase)
                    runner = TrialRunner(spec, space, measurer,
                                         TrialEvents(view.on_stage, view.on_done, gate.release),
                                         host=host if team else None)
                    stopped_by = run_trials(study, runner, Limits(n_trials, timeout_s, started),
                                            spec.study.storage, gate=gate, say=say,
                                            poll_s=min(max(spec.study.heartbeat_interval_s / 2, 0.5), 10.0))
                    confirmations = _confirm(study, spec, runner, measurer, confirm, repeats, console, pareto)
            best = None if pareto else best_record(study)
            if confirmations:
                winner = confirmed_winner(confirmations)
                if winner is not None:
                    best = TrialRecord.from_trial(study.trials[winner.trial])
            command = _finish(spec, target, best, table, console)
        except LeaseLost:
            requeue_interrupted(study, runner.current if runner else None)
            raise  # the host belongs to another worker now: leave it alone
        except (Interrupted, TargetUnavailable, KeyboardInterrupt):
            requeue_interrupted(study, runner.current if runner else None)
            try:
                _finish(spec, target, None if pareto else best_record(study), table, console, quiet=True)
            except SpectuneError as exc:  # e.g. the host is still unreachable: say so, keep the first error
                console.print(f"could not leave the target as [finish] says: {exc}", markup=False)
            raise
        finally:
            target.close()
    return TuneOutcome(spec.study.name, len(measured_records(study)), stopped_by, best, command)


def worker_seed(seed: int | None, host: str) -> int | None:
    """A seed of its own for the worker on ``host``: reproducible per host, different between hosts."""
    return None if seed is None else (seed * 1_000_003 + zlib.crc32(host.encode())) % 2**32


def _confirm(study: optuna.Study, spec: StudySpec, runner: TrialRunner, measurer: Any, top: int, repeats: int,
             console: Console, pareto: bool) -> list[Confirmation]:
    if top <= 0 or pareto:
        return []
    console.print(f"confirmation: re-measuring the top {top} configurations {repeats}× each on fresh restarts")
    results = confirm_top(study, spec, runner, measurer, top=top, repeats=repeats)
    for c in results:
        spread = f"{min(c.scores):.3f}–{max(c.scores):.3f}" if c.scores else "–"
        console.print(f"  trial {c.trial}: study score {c.original_score:.3f}, confirmed mean {c.mean:.3f} "
                      f"± {c.stdev:.3f} (range {spread}, {c.failed_restarts} failed restarts)", highlight=False)
    return results



def _finish(spec: StudySpec, target: Target, best: TrialRecord | None, table: Any, console: Console,
            *, quiet: bool = False) -> str | None:
    """Leave the target as [finish] says and return the best launch command."""
    command = None
    config = best.config if best is not None else None
    if config is not None:
        prefix = spec.target.settings.launch_prefix() or ("python3", "-m", "sglang.launch_server")
        command = launch_command(prefix, config, table).shell(multiline=True)
    if spec.finish == "best" and config is not None:
        if not quiet:
            console.print(f"deploying the best configuration (trial {best.number if best else '?'})")
        target.deploy(config)
    elif spec.finish == "original" or (spec.finish == "best" and config is None):
        target.restore()
    return command
