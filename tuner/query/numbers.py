"""Figures as text, in one place: a value, optionally ± its 95 % half-width, and a change against a
baseline.

Confidence intervals are filled in by the confirmation work (per-phase half-widths on the record);
until a figure carries one, ``with_interval`` prints the value alone, so callers pass whatever
half-width they have.
"""

from __future__ import annotations


def with_interval(value: float | None, half_width: float | None = None, *, digits: int = 1,
                  unit: str = "") -> str:
    """``266.8 tok/s``, or ``266.8 ± 4.1 tok/s`` when a half-width is known; ``–`` without a
    value."""
    if value is None:
        return "–"
    text = f"{value:.{digits}f}"
    if half_width is not None:
        text += f" ± {half_width:.{digits}f}"
    return f"{text} {unit}".rstrip()


def change(before: float | None, after: float | None) -> str:
    """``+118 %`` (relative change of ``after`` against ``before``); ``–`` when either is missing or
    zero."""
    if before is None or after is None or before == 0:
        return "–"
    return f"{(after - before) / before * 100:+.0f} %"


def truncate(text: str | None, limit: int) -> str:
    """The first line of ``text`` cut to ``limit`` characters (an ellipsis marks the cut)."""
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
