"""Console output of a benchmark: a progress bar per phase while it runs, a results table after.

Kept apart from the measuring code so that a trial (which has its own live view) uses none of it.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from objectives.progress import PhaseProgress
from objectives.results import BenchmarkResult, PhaseResult

#: (row label, metric, format) for the results table; latencies are shown as mean / p50 / p99.
_ROWS: tuple[tuple[str, str, str], ...] = (
    ("per-request tok/s (mean)", "per_request_tok_s_mean", "{:.1f}"),
    ("per-request tok/s (median)", "per_request_tok_s_median", "{:.1f}"),
    ("aggregate output tok/s", "aggregate_tok_s", "{:.1f}"),
    ("request rate (req/s)", "request_rate", "{:.2f}"),
    ("accept length", "accept_length", "{:.2f}"),
    ("tokens per chunk", "tokens_per_chunk", "{:.2f}"),
    ("achieved concurrency", "achieved_concurrency", "{:.1f}"),
    ("error rate", "error_rate", "{:.1%}"),
)
_LATENCIES = (("TTFT", "ttft"), ("ITL", "itl"), ("TPOT", "tpot"), ("E2E", "e2e"))


class ProgressDisplay:
    """A ``ProgressCallback`` drawing one rich progress bar per phase on stderr."""

    def __init__(self, console: Console | None = None) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(), console=console or Console(stderr=True), transient=False,
        )
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> ProgressDisplay:
        self.progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.progress.stop()

    def __call__(self, event: PhaseProgress) -> None:
        task = self.tasks.get(event.label)
        if task is None:
            task = self.progress.add_task(event.label, total=None, detail="")
            self.tasks[event.label] = task
        if event.stage == "warmup":
            self.progress.update(task, description=f"{event.label} warmup", detail="")
            return
        if event.target_requests is not None:
            total, done = float(event.target_requests), float(event.finished)
        else:
            total, done = event.target_duration_s or 1.0, event.elapsed_s
        rate = event.output_tokens / event.elapsed_s if event.elapsed_s > 0 else 0.0
        failed = f", {event.failed} failed" if event.failed else ""
        detail = f"{event.finished} req, {rate:,.0f} tok/s{failed}"
        if event.stage == "done":
            done = total
        self.progress.update(task, description=event.label, total=total, completed=min(done, total),
                             detail=detail)


def results_table(result: BenchmarkResult) -> Table:
    title = f"spectune bench {result.base_url}" + (f" — {result.model}" if result.model else "")
    caption = None
    if result.scaled:
        scale = result.time_scale
        title += f" — SCALED ×{scale:g}"
        caption = (f"simulator time scale {scale:g}: rates are {scale:g}× and times 1/{scale:g} of "
                   "what the simulated server would measure")
    table = Table(title=title, caption=caption)
    table.add_column("metric")
    for phase in result.phases:
        table.add_column(phase.label, justify="right")
    for label, name, fmt in _ROWS:
        table.add_row(label, *(_fmt(p.metric(name), fmt) for p in result.phases))
    for label, key in _LATENCIES:
        table.add_row(f"{label} ms (mean / p50 / p99)", *(_latency(p, key) for p in result.phases))
    table.add_row("requests (ok / failed / cancelled)",
                  *(f"{p.completed} / {p.failed} / {p.cancelled}" for p in result.phases))
    table.add_row("errors", *(_errors(p) for p in result.phases))
    table.add_row("window s (stopped by)",
                  *(f"{p.duration_s:.1f} ({p.stopped_by})" for p in result.phases))
    table.add_row("throughput 95% CI", *(_fmt(p.ci_half_width, "±{:.1%}") for p in result.phases))
    table.add_row("TTFT p50 / TTFT p99 / ITL mean 95% CI ms",
                  *(_latency_intervals(p) for p in result.phases))
    return table


def _fmt(value: float | None, fmt: str) -> str:
    return "—" if value is None else fmt.format(value)


def _latency(phase: PhaseResult, key: str) -> str:
    values = [getattr(phase, f"{key}_{s}_ms") for s in ("mean", "p50", "p99")]
    return " / ".join(_fmt(v, "{:.1f}") for v in values)


def _latency_intervals(phase: PhaseResult) -> str:
    intervals = [phase.ttft_p50_ms_ci, phase.ttft_p99_ms_ci, phase.itl_mean_ms_ci]
    return " / ".join("—" if i is None else f"{i[0]:.1f}–{i[1]:.1f}" for i in intervals)


def _errors(phase: PhaseResult) -> str:
    if not phase.errors:
        return "none"
    return ", ".join(f"{kind} {n}" for kind, n in phase.errors.items())
