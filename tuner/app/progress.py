"""The live view of a running study: trial n/N, the current stage and phase, best so far, elapsed
and ETA, plus one summary line per finished trial (which stays in the terminal's scrollback).

Everything shown is plain text, never Rich markup: flag lists such as ``[num-steps=4 eagle-topk=1]``
and server messages contain brackets that markup would swallow. On a resumed study the best and the
ETA start from the stored trials, so the first minutes after a restart do not show a stale best or
an ETA of seconds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Mapping

import optuna
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.text import Text

from objectives.confidence import Interval
from objectives.progress import PhaseProgress
from objectives.scoring import phase_interval, primary_metric
from tuner.core.durations import format_duration
from tuner.store.record import Outcome, RejectedBy, TrialRecord, skipped_text


class LiveView:
    """``already``, ``best`` and ``durations`` describe the stored trials of earlier runs (a
    resume): the count, the stored best score and how long each measured trial took. ``extra``:
    confirmation restarts to come after the trials (each costs about one trial), part of the ETA."""

    def __init__(self, console: Console, total: int, already: int = 0, *, extra: int = 0,
                 best: float | None = None, durations: Iterable[float] = ()) -> None:
        self.console = console
        self.done = already
        self.total = total
        self.extra = extra
        self.best: float | None = best
        self.durations: list[float] = [d for d in durations if d > 0]
        self._trial_started: dict[int, float] = {}
        self.current: int | None = None  # the trial the stage line is about
        self.flags = ""  # its flag values, shown from its deploy on
        self._optuna_level = optuna.logging.get_verbosity()
        # The short, fixed-width parts first and the long one (best, stage, flags) last: a narrow
        # terminal cuts the line's end, and the clocks and the ETA must not be what it loses.
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=24 if console.width >= 120 else 8),
            MofNCompleteColumn(),
            TrialClock(self),
            TextColumn("study"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}", markup=False),
            # the rest of the line, cut with "…" where it ends
            TextColumn("{task.fields[detail]}", markup=False,
                       table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
            console=console,
            transient=True,
            expand=True,
        )
        self.task: TaskID = self.progress.add_task("trials", total=total, completed=already,
                                                   detail="", eta="")
        self.stage = ""
        self._refresh()

    def __enter__(self) -> LiveView:
        # Optuna's own warnings ("Trial 1 failed with value None.") would print into the middle of
        # the progress line; every such ending is already reported by the trial's summary line.
        self._optuna_level = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
        optuna.logging.set_verbosity(self._optuna_level)

    def on_deploy(self, number: int, values: Mapping[str, object]) -> None:
        """The trial's flags, shown from its deploy on (not only on its summary line once it
        ends)."""
        self._trial_started.setdefault(number, time.monotonic())
        self.current = number
        self.flags = flags_text(values)
        self._refresh()

    def on_stage(self, number: int, stage: str) -> None:
        self._trial_started.setdefault(number, time.monotonic())
        if number != self.current:
            self.current, self.flags = number, ""
        self.stage = f"trial {number}: {stage}"
        self._refresh()

    def on_phase(self, update: PhaseProgress) -> None:
        if update.stage == "warmup":  # the counts are of measured requests: none has started yet
            progress = "warming up"
        else:
            target = f"/{update.target_requests}" if update.target_requests else ""
            failed = f", {update.failed} failed" if update.failed else ""
            progress = f"{update.stage} {update.finished}{target}{failed}"
        # "trial 3: C=64 measure 12/128", not "trial 3: C=64 · C=64 measure …"
        self.stage = f"{self.stage.split(': ')[0]}: {update.label} {progress}"
        self._refresh()

    def trial_elapsed_s(self) -> float | None:
        """Seconds since the current trial began (None between trials)."""
        started = self._trial_started.get(self.current) if self.current is not None else None
        return None if started is None else time.monotonic() - started

    def on_done(self, record: TrialRecord) -> None:
        # The runner calls this before Optuna stores the trial's state; the record has the state it
        # ends with.
        started = self._trial_started.pop(record.number, None)
        if record.number == self.current:
            self.current, self.flags = None, ""
        if record.is_measured:
            self.done += 1
            if started is not None:
                self.durations.append(time.monotonic() - started)
        if record.is_candidate and record.score is not None:
            self.best = record.score if self.best is None else max(self.best, record.score)
        self.console.print(summary_line(record), markup=False, highlight=False)
        self.progress.update(self.task, completed=min(self.done, self.total))
        self._refresh()

    def on_confirm(self, number: int, run: int) -> None:
        """A confirmation restart of trial ``number`` (round ``run``) starts."""
        if self.extra:
            self.extra -= 1
        self.stage = f"confirming trial {number} (round {run + 1})"
        self._refresh()

    def eta_s(self) -> float | None:
        """Remaining measured trials and confirmation restarts × the median measured trial's
        duration (this run's and earlier runs'): the median, because one slow start-up timeout
        should not double the estimate."""
        if not self.durations:
            return None
        return statistics.median(self.durations) * (max(self.total - self.done, 0) + self.extra)

    def _refresh(self) -> None:
        eta = self.eta_s()
        best = f"best {self.best:.3f}" if self.best is not None else "best –"
        flags = f" [{self.flags}]" if self.flags else ""
        self.progress.update(self.task, detail=f"{best} · {self.stage}{flags}",
                             eta="" if eta is None else "ETA " + format_duration(eta))


class TrialClock(ProgressColumn):
    """``trial 0:42``: the time since the current trial began (the elapsed column beside it is the
    study's)."""

    def __init__(self, view: LiveView) -> None:
        super().__init__()
        self.view = view

    def render(self, task: Task) -> Text:
        elapsed = self.view.trial_elapsed_s()
        if elapsed is None:
            return Text("")
        minutes, seconds = divmod(int(elapsed), 60)
        return Text(f"trial {minutes}:{seconds:02d}")


def flags_text(values: Mapping[str, object]) -> str:
    """``num-steps=3 eagle-topk=1 …``: flag values as the live view shows them."""
    return " ".join(f"{k.removeprefix('--speculative-').removeprefix('--')}={v}" for k,
                    v in values.items())


def summary_line(record: TrialRecord) -> str:
    """``#7 measured score 1.083  C=1 241.2 tok/s  C=64 1893 tok/s  accept 3.41  steps=3 topk=1
    …``"""
    number = record.number
    outcome = record.outcome
    values = flags_text(record.params_decoded)
    if outcome is Outcome.REJECTED:
        by = (record.rejected_by or RejectedBy.RULES).label
        return f"#{number} {by} before deploying: {record.reason}  [{values}]"
    if outcome is Outcome.TAKEN:
        return (f"#{number} taken: trial #{record.taken_by} is measuring this configuration  "
                f"[{values}]")
    if outcome is Outcome.DEPLOY_FAILED:
        return f"#{number} failed to start ({record.failure_class})  [{values}]"
    if outcome is Outcome.RUN_FAILED:
        return (f"#{number} {record.failure_class} ({record.failure_cause}): {record.failure}  "
                f"[{values}]")
    if outcome is Outcome.PHASE_FAILED:
        return (f"#{number} not measured ({record.failure_class}: {record.failure}); queued again  "
                f"[{values}]")
    parts = [f"#{number} {outcome or '?'}"]
    if outcome is Outcome.DUPLICATE:
        parts[0] += f" of #{record.duplicate_of} (not redeployed)"
    if record.shown_score is not None:
        parts.append(f"score {record.shown_score:.3f}{interval_text(record.score_ci, 3)}")
    for concurrency, metrics in record.metrics.items():
        value = metrics.get(primary_metric(concurrency))
        if value is not None:
            interval = interval_text(phase_interval(record.metrics, concurrency))
            parts.append(f"C={concurrency} {value:.1f}{interval} tok/s")
        accept = metrics.get("accept_length")
        if accept is not None and concurrency == 1:
            parts.append(f"accept {accept:.2f}")
        if metrics.get("error_rate"):
            parts.append(f"errors {metrics['error_rate']:.1%}")
    if record.skipped_phases:
        parts.append(skipped_text(record.skipped_phases))
    return "  ".join(parts) + f"  [{values}]"


def interval_text(interval: Interval | None, digits: int = 1) -> str:
    """`` [1.02, 1.14]``: a figure's 95 % interval as the live line shows it ("" when there is
    none)."""
    return f" {interval.text(digits)}" if interval is not None else ""
