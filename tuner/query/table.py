"""``spectune trials``: every trial as one row — tuned flags, C=1 and C=64 speed, accept length,
score, status.

Rows are plain frozen values so the same data feeds the terminal table, ``--json`` and the HTML
report.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from objectives.confidence import Interval
from objectives.scoring import phase_interval, phase_value, primary_metric
from tuner.core.errors import UsageError
from tuner.query.effective import Change, changes, shared, summary
from tuner.query.numbers import truncate
from tuner.query.ranking import Ranking, TrialView
from tuner.sglang.launch import FlagValue


def short_flag(flag: str) -> str:
    """``--speculative-num-steps`` → ``num-steps``: column headers that fit a terminal."""
    return flag.removeprefix("--").removeprefix("speculative-")


def phase_label(concurrency: int) -> str:
    kind = "per-req" if primary_metric(concurrency) == "per_request_tok_s_mean" else "aggr"
    return f"C={concurrency} {kind} tok/s"


@dataclass(frozen=True)
class TrialRow:
    number: int
    status: str
    # every tuned flag, None where the trial did not set it
    flags: tuple[tuple[str, FlagValue | None], ...]
    speeds: tuple[tuple[int, float | None], ...]  # (concurrency, primary metric)
    accept_length: float | None
    score: float | None
    feasible: bool
    failure: str | None
    # 95 % interval of each phase's primary metric
    speed_intervals: tuple[tuple[int, Interval | None], ...] = ()
    score_interval: Interval | None = None
    # the confirmation stage's figures, when this trial was confirmed
    confirmed: Confirmed | None = None
    message: str | None = None  # the stored failure message or rejection reason, in full
    #: Where SGLang runs other values than the command line gives (tuner/query/effective.py).
    changes: tuple[Change, ...] = ()
    effective: dict[str, Any] | None = None  # every value SGLang runs, as stored on the trial
    cause: str | None = None  # the typed failure cause (tuner/targets/classify.py), e.g. decode-oom

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "status": self.status, "flags": dict(self.flags),
                **{f"c{c}_tok_s": v for c, v in self.speeds},
                **{f"c{c}_tok_s_ci": _pair(i) for c, i in self.speed_intervals},
                "accept_length": self.accept_length,
                "score": self.score, "score_ci": _pair(self.score_interval),
                "feasible": self.feasible,
                "failure": self.failure, "cause": self.cause, "message": self.message,
                "confirmed": self.confirmed.to_json() if self.confirmed else None,
                "effective": self.effective, "sglang_changes": [c.to_json() for c in self.changes]}


@dataclass(frozen=True)
class Confirmed:
    """A trial's confirmed figures: its fresh runs pooled, and how many runs they rest on."""

    runs: int
    score: float | None
    score_interval: Interval | None
    speeds: tuple[tuple[int, float | None, Interval | None], ...]  # (concurrency, value, interval)

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "score": self.score, "score_ci": _pair(self.score_interval),
                **{f"c{c}_tok_s": v for c, v, _ in self.speeds},
                **{f"c{c}_tok_s_ci": _pair(i) for c, _, i in self.speeds}}

    def text(self) -> str:
        return (f"{fmt(self.score, 3)}{pm(self.score_interval, 3)} ({self.runs} "
                f"run{'s' if self.runs != 1 else ''})")


def _pair(interval: Interval | None) -> list[float] | None:
    return interval.to_list() if interval is not None else None


def pm(interval: Interval | None, digits: int = 1) -> str:
    """`` ±0.061``: half the 95 % interval (every interval spectune computes is symmetric); ""
    without one."""
    return f" ±{(interval.high - interval.low) / 2:.{digits}f}" if interval is not None else ""


def rows(ranking: Ranking, tuned_flags: Sequence[str]) -> list[TrialRow]:
    return [_row(t, ranking, tuned_flags) for t in ranking.trials]


def _row(t: TrialView, ranking: Ranking, tuned_flags: Sequence[str]) -> TrialRow:
    confirmed = None
    if t.confirmed_runs:
        pooled = t.record.confirmed.pooled if t.record.confirmed else {}
        confirmed = Confirmed(t.confirmed_runs, t.confirmed_score, t.confirmed_interval,
                              tuple((c, phase_value(pooled, c), phase_interval(pooled, c))
                                    for c in ranking.concurrencies))
    # A trial never deployed (rejected, interrupted before its config was stored) has no deployed
    # flags; its proposal's values are what it was about, so they fill the columns instead of "–".
    proposed = t.record.params_decoded if t.config is None else {}
    return TrialRow(number=t.number, status=t.status,
                    flags=tuple((f, t.tuned.get(f, proposed.get(f))) for f in tuned_flags),
                    speeds=tuple((c, t.value(c)) for c in ranking.concurrencies),
                    accept_length=t.accept_length(),
                    score=t.score, feasible=t.feasible, failure=t.failure,
                    speed_intervals=tuple((c, phase_interval(t.metrics, c))
                                          for c in ranking.concurrencies),
                    score_interval=t.interval, confirmed=confirmed, message=t.record.failure
                    or t.record.reason,
                    cause=str(t.record.failure_cause) if t.record.failure_cause else None,
                    changes=changes(t.config, t.record.effective),
                    effective=dict(t.record.effective) if t.record.effective else None)


def sort_keys(tuned_flags: Sequence[str], concurrencies: Sequence[int]) -> list[str]:
    return ["number", "score", *(f"c{c}" for c in concurrencies), "accept", "status",
            *(short_flag(f) for f in tuned_flags)]


def sort_rows(table: list[TrialRow], key: str, tuned_flags: Sequence[str],
              concurrencies: Sequence[int]) -> list[TrialRow]:
    """Sort by ``key``: measurements best first, flags and status ascending; rows without a value
    last. A tuned flag may be named as in the table (``num-steps``) or in full
    (``speculative-num-steps``, with or without ``--``), as the study file names it."""
    valid = sort_keys(tuned_flags, concurrencies)
    full = {f.removeprefix("--"): short_flag(f) for f in tuned_flags}
    key = full.get(key.removeprefix("--"), key)
    if key not in valid:
        raise UsageError(f"--sort: unknown key {key!r}; use one of: {', '.join(valid)}")
    get, descending = _getter(key, tuned_flags)
    present = [r for r in table if get(r) is not None]
    missing = [r for r in table if get(r) is None]
    present.sort(key=lambda r: (_sortable(get(r)), -r.number if descending else r.number),
                 reverse=descending)
    return present + missing


def _getter(key: str, tuned_flags: Sequence[str]) -> tuple[Callable[[TrialRow], Any], bool]:
    """How to read ``key`` from a row, and whether larger is better (sorts first)."""
    if key == "number":
        return (lambda r: r.number), False
    if key == "status":
        return (lambda r: r.status), False
    if key == "score":
        return (lambda r: r.score), True
    if key == "accept":
        return (lambda r: r.accept_length), True
    if key[0] == "c" and key[1:].isdigit():
        concurrency = int(key[1:])
        return (lambda r: dict(r.speeds).get(concurrency)), True
    flag = next(f for f in tuned_flags if short_flag(f) == key)
    return (lambda r: dict(r.flags).get(flag)), False


def _sortable(value: Any) -> Any:
    # Flag values of one column share a type, except choice lists mixing e.g. "off" and numbers.
    return ((0, value) if isinstance(value, int | float) and not isinstance(value, bool)
            else (1, str(value)))


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if value != int(value) or digits else f"{value:g}"
    return str(value)


def render(table: list[TrialRow], concurrencies: Sequence[int], best: int | None,
           leader: int | None = None, *, width: int = 200) -> Any:
    """A rich Table for a terminal ``width`` wide; the best trial's row is marked with ★, a leader
    that was never confirmed with ☆ (``fitted``: and the width to print it at)."""
    return fitted(table, concurrencies, best, leader, width=width)[0]


def fitted(table: list[TrialRow], concurrencies: Sequence[int], best: int | None,
           leader: int | None = None, *, width: int = 200) -> tuple[Any, int]:
    """``render``'s table, and the width to print it at.

    The roomy layout (flag names on one line, padded cells) where it fits, else the compact one;
    printed at least as wide as its narrowest form, because rich crops a table whose columns cannot
    shrink to the width — whole columns lost — where lines longer than the terminal only wrap."""
    roomy = _table(table, concurrencies, best, leader, compact=False)
    if _fits(_stand_in(roomy), width):
        return roomy, width
    compact = _table(table, concurrencies, best, leader, compact=True)
    probe = _stand_in(compact)
    if _fits(probe, width):
        return compact, width
    # the least width that holds it (a table gets no narrower by printing it wider)
    low, high = width, max(width, _natural_width(probe))
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if _fits(probe, middle) else (middle + 1, high)
    return compact, high


def _stand_in(table: Any) -> Any:
    """``table`` with only the rows that set its column widths — in each column, the one with the
    longest line and the one with the longest word (all rich measures a column by) — so that
    fitting a study of hundreds of trials renders a few rows, not all of them, each time."""
    from rich.cells import cell_len
    from rich.table import Table

    cells = [[str(cell) for cell in column.cells] for column in table.columns]
    rows = len(cells[0]) if cells else 0

    def widest(column: list[str], parts: Callable[[str], list[str]]) -> int:
        return max(range(rows), key=lambda i: max(map(cell_len, parts(column[i])), default=0))

    keep = {widest(column, parts) for column in cells if rows
            for parts in (str.splitlines, str.split)}
    out = Table(show_lines=False, header_style=table.header_style, padding=table.padding)
    for column in table.columns:
        out.add_column(column.header, justify=column.justify, no_wrap=column.no_wrap,
                       min_width=column.min_width, overflow=column.overflow)
    for i in sorted(keep):
        out.add_row(*(column[i] for column in cells))
    return out


#: The narrowest a text column (status, what SGLang runs, the failure) may wrap to in the roomy
#: layout, and in the compact one.
ROOMY_TEXT_MIN = 16
COMPACT_TEXT_MIN = 8


def _fits(table: Any, width: int) -> bool:
    """Whether rich prints ``table`` at ``width`` with every column at least its least width
    (``_least_widths``). rich shrinks the widest columns alike and, out of room, every column
    evenly — a flag's name below its width, a text column down to nothing — and crops what still
    does not fit: read off the top border, which has one run of ━ per column."""
    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None).print(table)
    first = buffer.getvalue().split("\n", 1)[0].rstrip()
    if not first.endswith("┓"):
        return False  # cropped
    drawn = [len(run) for run in first[1:-1].split("┳")]
    _, right, _, left = table.padding
    least = _least_widths(table)
    return len(drawn) == len(least) and all(
        d >= n + left + right for d, n in zip(drawn, least, strict=True))


def _least_widths(table: Any) -> list[int]:
    """Each column's least acceptable width (without padding): a figure or flag column (right
    justified), its widest line where it does not wrap, else its longest header word (figures
    fold); a text column, that and a few words of its text."""
    from rich.cells import cell_len

    compact = table.padding == (0, 0, 0, 0)
    out = []
    for column in table.columns:
        lines = [line for cell in (column.header, *column.cells)
                 for line in str(cell).split("\n")]
        widest = max((cell_len(line) for line in lines), default=1)
        if column.justify == "right":
            out.append(widest if column.no_wrap else column.min_width or 1)
        else:
            text_min = COMPACT_TEXT_MIN if compact else ROOMY_TEXT_MIN
            out.append(max(column.min_width or 1, min(widest, text_min)))
    return out


def _natural_width(table: Any) -> int:
    """The width at which every cell of ``table`` is on one line (what it never needs more of)."""
    from rich.console import Console
    from rich.measure import Measurement

    console = Console(file=io.StringIO(), width=100_000)
    return Measurement.get(console, console.options, table).maximum


def _table(table: list[TrialRow], concurrencies: Sequence[int], best: int | None,
           leader: int | None, *, compact: bool) -> Any:
    from rich.table import Table
    from rich.text import Text

    common = shared(r.changes if r.effective else None for r in table)
    captions = [f"every trial: SGLang runs {'; '.join(c.text() for c in common)}"] if common else []
    if best is not None:
        captions.append(f"★ the answer (trial {best})"
                        + (f"; ☆ trial {leader} leads under these weights but was never confirmed"
                           if leader is not None
                           else ""))
    # Compact: cells touch the column lines, so the flag headers and every figure fit a 120-column
    # terminal whole (headers wrap at their hyphens, never lose letters).
    out = Table(show_lines=False, header_style="bold", caption="\n".join(captions) or None,
                padding=(0, 0) if compact else (0, 1))
    add = _header_adder(out)
    # Roomy: flags and figures stay on one line and only the text columns (status, what SGLang
    # runs, the failure) wrap — rich shrinks the widest columns alike, and with every column
    # wrapable it squeezed a flag's name below its width and cropped the table instead.
    figure = {"justify": "right", "no_wrap": not compact}
    add("#", **figure)
    add("status")
    flags = [f for f, _ in table[0].flags] if table else []
    for flag in flags:
        # Wide terminals show a flag's name on one line; narrow ones wrap it at its hyphens, never
        # mid-word.
        add(short_flag(flag).replace("-", "-\n") if compact else short_flag(flag), **figure)
    for c in concurrencies:
        add(phase_label(c), **figure)
    add("accept", **figure)
    add("score ±95%", **figure)
    confirmed = any(r.confirmed for r in table)
    if confirmed:
        add("confirmed ±95%", **figure)
    changed = any(set(r.changes) - set(common) for r in table)
    # only when SGLang runs some trial differently from its command line (beyond what all share)
    if changed:
        add("SGLang runs")
    add("failure")
    for r in table:
        mark = "★" if r.number == best else "☆" if r.number == leader else ""
        extra = [r.confirmed.text() if r.confirmed else ""] if confirmed else []
        extra += [summary(tuple(c for c in r.changes if c not in common))] if changed else []
        cells = [f"{mark}{r.number}", r.status, *(_flag_text(v) for _, v in r.flags),
                 *(speed_text(r, c, v) for c, v in r.speeds), fmt(r.accept_length, 2),
                 fmt(r.score, 3) + pm(r.score_interval, 3), *extra, failure_text(r)]
        # plain text: messages and values may contain [brackets]
        out.add_row(*(Text(c) for c in cells))
    return out


def _header_adder(table: Any) -> Callable[..., None]:
    """``add_column`` whose header never loses letters: a narrow terminal (120 columns) wraps a
    header between its words and at a flag's hyphens (``num-`` / ``steps``), and no column gets
    narrower than its longest word — cells wrap instead."""

    def add(header: str, **options: Any) -> None:
        words = header.replace("\n", " ").split()
        # Cells fold rather than end in "…": a figure cut short is a wrong figure.
        table.add_column(header, min_width=max(map(len, words), default=1), overflow="fold",
                         **options)

    return add


def speed_text(row: TrialRow, concurrency: int, value: float | None) -> str:
    """``241.2 ±8.3``: a phase's primary metric with its 95 % half-width."""
    return fmt(value) + (pm(dict(row.speed_intervals).get(concurrency)) if value is not None
                         else "")


#: Characters of a failure message shown in the table (``spectune trial N`` shows it all).
MESSAGE_CHARS = 70


def failure_text(row: TrialRow) -> str:
    """``out-of-memory: CUDA out of memory while capturing…`` — the class, then the stored message,
    cut."""
    if row.failure is None:
        return ""
    message = truncate(row.message, MESSAGE_CHARS)
    # A deploy failure's message starts with its class (DeployFailed's text): do not say it twice.
    message = message.removeprefix(f"{row.failure}: ")
    return f"{row.failure}: {message}" if message and message != row.failure else row.failure


def _flag_text(value: FlagValue | None) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return fmt(value)
