"""``spectune tune``: run a study to its end, resumably.

Exit codes (docs/study.md): 0 done; 2 bad study file; 3 target unreachable after retries; 4 storage failing
after retries; 5 study busy (another tuner holds the SQLite file); 130 interrupted by Ctrl-C; 143 by SIGTERM.
An interrupted trial is recorded as FAIL with ``interrupted`` and its parameters queued again, so the next run
re-measures it; the target is left as ``[finish]`` says in every case.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState
from rich.console import Console

from tuner.confirm import Confirmation, confirm_top, confirmed_winner
from tuner.errors import SpectuneError
from tuner.launch import ServerConfig, launch_command
from tuner.progress import LiveView
from tuner.query.fingerprint import record_or_check
from tuner.samplers import make_sampler, resolve_sampler_name
from tuner.sglang.options import load_option_table
from tuner.space import SearchSpace
from tuner.storage import open_study, recover_interrupted, study_lock, with_storage_retries
from tuner.study_spec import StudySpec
from tuner.targets.base import Target, TargetUnavailable
from tuner.trial import COUNTS, OUTCOME, TrialEvents, TrialRunner

#: Proposals in a row that cost nothing (duplicates, rejections) before we call the space exhausted.
MAX_FREE_PROPOSALS = 60


class Interrupted(SpectuneError):
    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}; the current trial will be re-run on "
                         "resume")


@dataclass(frozen=True)
class TuneOutcome:
    study_name: str
    measured: int
    stopped_by: str  # n_trials | timeout | exhausted
    best: FrozenTrial | None
    best_command: str | None


def measured_trials(study: optuna.Study) -> list[FrozenTrial]:
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.user_attrs.get(COUNTS)]


def best_trial(study: optuna.Study) -> FrozenTrial | None:
    """The feasible, fully measured trial with the highest score (single objective)."""
    candidates = [t for t in measured_trials(study) if t.user_attrs.get(OUTCOME) == "measured"
                  and not t.user_attrs.get("skipped_phases") and all(v <= 0 for v in (t.constraints or {}).values())]
    return max(candidates, key=lambda t: t.user_attrs.get("score", float("-inf")), default=None)


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C: the running trial stops now, is recorded, and the target is restored."""
    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class _QuietInterrupts(logging.Filter):
    """Optuna logs every exception that ends a trial with its traceback; an interrupt is not a fault (the tune
    command reports it in one line), and a traceback in the output reads like a crash."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, Interrupted | KeyboardInterrupt | TargetUnavailable)


_OPTIMIZE_LOGGER = logging.getLogger("optuna.study._optimize")
if not any(isinstance(f, _QuietInterrupts) for f in _OPTIMIZE_LOGGER.filters):
    _OPTIMIZE_LOGGER.addFilter(_QuietInterrupts())


def run_study(spec: StudySpec, *, n_trials: int | None = None, timeout_s: float | None = None,
              console: Console | None = None, target: Target | None = None, confirm: int = 0,
              repeats: int = 3) -> TuneOutcome:
    console = console or Console(stderr=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n_trials = n_trials or spec.study.n_trials
    timeout_s = timeout_s if timeout_s is not None else spec.study.timeout_s
    table = load_option_table(spec.study.sglang_version)
    space = SearchSpace(spec, table)
    pareto = spec.objective.mode == "pareto"
    sampler = make_sampler(spec.study.sampler, spec.study.seed, multi_objective=pareto)
    directions = ["maximize", "maximize"] if pareto else ["maximize"]
    metric_names = ([f"c{c}_tok_s" for c in sorted(spec.objective.weights)] if pareto else ["score"])

    with study_lock(spec.study.storage):
        study = open_study(spec.study.storage, spec.study.name, sampler, directions, metric_names)
        record_or_check(study, spec)  # refuse to mix trials of a changed study file (tuner/query/fingerprint.py)
        study.set_user_attr("sampler", resolve_sampler_name(spec.study.sampler))
        recovered = recover_interrupted(study)
        if recovered:
            console.print(f"resuming: trial(s) {', '.join(map(str, recovered))} were interrupted and will be re-run")
        enqueue_baseline(study, space, spec)
        if target is None:
            from tuner.targets import make_target

            target = make_target(spec)
        started = time.monotonic()
        try:
            target.preflight(space.emittable_flags())
            already = len(measured_trials(study))
            with LiveView(console, n_trials, already) as view:
                from tuner.measure import TargetMeasurer

                measurer = TargetMeasurer(target, spec.benchmark, progress=view.on_phase)
                runner = TrialRunner(spec, space, measurer, TrialEvents(view.on_stage, view.on_done))
                with interruptible():
                    stopped_by = _loop(study, runner, spec, n_trials, timeout_s, started)
                    confirmations = _confirm(study, spec, runner, measurer, confirm, repeats, console, pareto)
            best = None if pareto else best_trial(study)
            if confirmations:
                winner = confirmed_winner(confirmations)
                if winner is not None:
                    best = study.trials[winner.trial]
            command = _finish(spec, target, best, table, console)
        except (Interrupted, TargetUnavailable, KeyboardInterrupt):
            _requeue_failed_running(study)
            try:
                _finish(spec, target, None if pareto else best_trial(study), table, console, quiet=True)
            except SpectuneError as exc:  # e.g. the host is still unreachable: say so, keep the first error
                console.print(f"could not leave the target as [finish] says: {exc}", markup=False)
            raise
        finally:
            target.close()
    return TuneOutcome(spec.study.name, len(measured_trials(study)), stopped_by, best, command)


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


def _loop(study: optuna.Study, runner: TrialRunner, spec: StudySpec, n_trials: int, timeout_s: float | None,
          started: float) -> str:
    free_in_a_row = 0
    while True:
        measured = measured_trials(study)
        if len(measured) >= n_trials:
            return "n_trials"
        if timeout_s is not None and _out_of_time(measured, started, timeout_s):
            return "timeout"
        if free_in_a_row >= MAX_FREE_PROPOSALS:
            return "exhausted"
        before = len(measured)
        with_storage_retries(lambda: study.optimize(runner, n_trials=1, catch=()), "running a trial",
                             spec.study.storage)
        free_in_a_row = 0 if len(measured_trials(study)) > before else free_in_a_row + 1


def _out_of_time(measured: list[FrozenTrial], started: float, timeout_s: float) -> bool:
    """Stop when one more trial would likely run past the timeout (Optuna only checks between trials)."""
    elapsed = time.monotonic() - started
    durations = [(t.datetime_complete - t.datetime_start).total_seconds() for t in measured[-5:]
                 if t.datetime_complete and t.datetime_start]
    margin = max(durations) if durations else 0.0
    return elapsed + margin >= timeout_s


def enqueue_baseline(study: optuna.Study, space: SearchSpace, spec: StudySpec) -> None:
    """The server's current configuration runs first, once per study (not once per resume or worker)."""
    if not spec.baseline or study.user_attrs.get("baseline_enqueued"):
        return
    study.set_user_attr("baseline_enqueued", True)
    if study.get_trials(deepcopy=False):
        return
    study.enqueue_trial(space.encode(spec.baseline), user_attrs={"baseline": True})


def _requeue_failed_running(study: optuna.Study) -> None:
    """The trial an interruption hit is FAIL now (Optuna records it); queue its parameters for the resume."""
    trials = study.get_trials(deepcopy=False)
    if trials and trials[-1].state == TrialState.FAIL and trials[-1].params:
        last = trials[-1]
        study.set_user_attr(f"interrupted_{last.number}", True)
        study.enqueue_trial(last.params, user_attrs={"retry_of": last.number})


def _finish(spec: StudySpec, target: Target, best: FrozenTrial | None, table: Any, console: Console,
            *, quiet: bool = False) -> str | None:
    """Leave the target as [finish] says and return the best launch command."""
    command = None
    config = ServerConfig.from_json(best.user_attrs["config"]) if best is not None else None
    if config is not None:
        prefix = spec.target.settings.get("command") or ("python3", "-m", "sglang.launch_server")
        command = launch_command(prefix, config, table).shell(multiline=True)
    if spec.finish == "best" and config is not None:
        if not quiet:
            console.print(f"deploying the best configuration (trial {best.number if best else '?'})")
        target.deploy(config)
    elif spec.finish == "original" or (spec.finish == "best" and config is None):
        target.restore()
    return command
