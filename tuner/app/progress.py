"""The live view of a running study: trial n/N, the current stage and phase, best so far, elapsed and ETA,
plus one summary line per finished trial (which stays in the terminal's scrollback).

Everything shown is plain text, never Rich markup: flag lists such as ``[num-steps=4 eagle-topk=1]`` and server
messages contain brackets that markup would swallow. On a resumed study the best and the ETA start from the
stored trials, so the first minutes after a restart do not show a stale best or an ETA of seconds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable

import optuna
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from objectives.phase import PhaseProgress
from objectives.scoring import primary_metric
from tuner.core.durations import format_duration
from tuner.engine.record import Outcome, TrialRecord


class LiveView:
    """``already``, ``best`` and ``durations`` describe the stored trials of earlier runs (a resume): the count,
    the stored best score and how long each measured trial took."""

    def __init__(self, console: Console, total: int, already: int = 0, *, best: float | None = None,
                 durations: Iterable[float] = ()) -> None:
        self.console = console
        self.started = time.monotonic()
        self.done = already
        self.total = total
        self.best: float | None = best
        self.durations: list[float] = [d for d in durations if d > 0]
        self._trial_started: dict[int, float] = {}
        self._optuna_level = optuna.logging.get_verbosity()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}", markup=False),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}", markup=False),
            console=console,
            transient=True,
        )
        self.task: TaskID = self.progress.add_task("trials", total=total, completed=already, detail="", eta="")
        self.stage = ""
        self._refresh()

    def __enter__(self) -> LiveView:
        # Optuna's own warnings ("Trial 1 failed with value None.") would print into the middle of the progress
        # line; every such ending is already reported by the trial's summary line.
        self._optuna_level = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
        optuna.logging.set_verbosity(self._optuna_level)

    def on_stage(self, number: int, stage: str) -> None:
        self._trial_started.setdefault(number, time.monotonic())
        self.stage = f"trial {number}: {stage}"
        self._refresh()

    def on_phase(self, update: PhaseProgress) -> None:
        target = f"/{update.target_requests}" if update.target_requests else ""
        failed = f", {update.failed} failed" if update.failed else ""
        self.stage = f"{self.stage.split(' · ')[0]} · {update.label} {update.stage} {update.finished}{target}{failed}"
        self._refresh()

    def on_done(self, record: TrialRecord) -> None:
        # The runner calls this before Optuna stores the trial's state; the record has the state it ends with.
        started = self._trial_started.pop(record.number, None)
        if record.is_measured:
            self.done += 1
            if started is not None:
                self.durations.append(time.monotonic() - started)
        if record.is_candidate and record.score is not None:
            self.best = record.score if self.best is None else max(self.best, record.score)
        self.console.print(summary_line(record), markup=False, highlight=False)
        self.progress.update(self.task, completed=min(self.done, self.total))
        self._refresh()

    def eta_s(self) -> float | None:
        """Remaining measured trials × the median measured trial's duration (this run's and earlier runs'):
        the median, because one slow start-up timeout should not double the estimate."""
        if not self.durations:
            return None
        return statistics.median(self.durations) * max(self.total - self.done, 0)

    def _refresh(self) -> None:
        eta = self.eta_s()
        best = f"best {self.best:.3f}" if self.best is not None else "best –"
        self.progress.update(self.task, detail=f"{best} · {self.stage}",
                             eta="" if eta is None else "ETA " + format_duration(eta))


def summary_line(record: TrialRecord) -> str:
    """``#7 measured score 1.083  C=1 241.2 tok/s  C=64 1893 tok/s  accept 3.41  steps=3 topk=1 …``"""
    number = record.number
    outcome = record.outcome
    values = " ".join(f"{k.removeprefix('--speculative-').removeprefix('--')}={v}"
                      for k, v in record.params_decoded.items())
    if outcome is Outcome.REJECTED:
        return f"#{number} rejected before deploying: {record.reason}  [{values}]"
    if outcome is Outcome.TAKEN:
        return f"#{number} taken: trial #{record.taken_by} is measuring this configuration  [{values}]"
    if outcome is Outcome.DEPLOY_FAILED:
        return f"#{number} failed to start ({record.failure_class})  [{values}]"
    parts = [f"#{number} {outcome or '?'}"]
    if outcome is Outcome.DUPLICATE:
        parts[0] += f" of #{record.duplicate_of} (not redeployed)"
    if record.score is not None:
        parts.append(f"score {record.score:.3f}")
    for concurrency, metrics in record.metrics.items():
        value = metrics.get(primary_metric(concurrency))
        if value is not None:
            parts.append(f"C={concurrency} {value:.1f} tok/s")
        accept = metrics.get("accept_length")
        if accept is not None and concurrency == 1:
            parts.append(f"accept {accept:.2f}")
        if metrics.get("error_rate"):
            parts.append(f"errors {metrics['error_rate']:.1%}")
    if record.skipped_phases:
        parts.append(f"skipped C={','.join(map(str, record.skipped_phases))} (cannot beat the best)")
    return "  ".join(parts) + f"  [{values}]"
