"""The live view of a running study: trial n/N, the current stage and phase, best so far, elapsed and ETA,
plus one summary line per finished trial (which stays in the terminal's scrollback)."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from objectives.phase import PhaseProgress
from objectives.scoring import primary_metric
from tuner.core.durations import format_duration
from tuner.engine.record import Outcome, TrialRecord


class LiveView:
    def __init__(self, console: Console, total: int, already: int = 0) -> None:
        self.console = console
        self.started = time.monotonic()
        self.done = already
        self.total = total
        self.best: float | None = None
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            console=console,
            transient=True,
        )
        self.task: TaskID = self.progress.add_task("trials", total=total, completed=already, detail="", eta="")
        self.stage = ""

    def __enter__(self) -> LiveView:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def on_stage(self, number: int, stage: str) -> None:
        self.stage = f"trial {number}: {stage}"
        self._refresh()

    def on_phase(self, update: PhaseProgress) -> None:
        target = f"/{update.target_requests}" if update.target_requests else ""
        failed = f", {update.failed} failed" if update.failed else ""
        self.stage = f"{self.stage.split(' · ')[0]} · {update.label} {update.stage} {update.finished}{target}{failed}"
        self._refresh()

    def on_done(self, record: TrialRecord) -> None:
        # The runner calls this before Optuna stores the trial's state; the record has the state it ends with.
        if record.is_measured:
            self.done += 1
        if record.is_candidate and record.score is not None:
            self.best = record.score if self.best is None else max(self.best, record.score)
        self.console.print(summary_line(record), highlight=False)
        self.progress.update(self.task, completed=min(self.done, self.total))
        self._refresh()

    def _refresh(self) -> None:
        elapsed = time.monotonic() - self.started
        eta = ""
        if self.done:
            eta = "ETA " + format_duration(elapsed / max(self.done, 1) * max(self.total - self.done, 0))
        best = f"best {self.best:.3f}" if self.best is not None else "best –"
        self.progress.update(self.task, detail=f"{best} · {self.stage}", eta=eta)


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
