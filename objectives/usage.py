"""Per-chunk output-token counts from what the server reported while streaming.

Two cases. Exact: every chunk that carried text also carried the cumulative completion-token count, so
each chunk's count is the difference from the previous one (OpenAI APIs with continuous usage, and the
native ``/generate``). Spread: the server gave only a final total; it is divided over the text chunks in
proportion to their characters (each chunk gets at least one token while the total allows), which keeps the
total exact and the TTFT right, and approximates the split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from objectives.records import ErrorKind


class UsageProblem(Exception):
    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class ChunkTokens:
    times: tuple[float, ...]
    tokens: tuple[int, ...]
    exact: bool

    @property
    def total(self) -> int:
        return sum(self.tokens)


def chunk_tokens(times: Sequence[float], cumulative: Sequence[int | None], chars: Sequence[int]) -> ChunkTokens:
    """Token counts for the chunks observed at ``times``; raises ``UsageProblem`` when the server's counts
    are missing or contradict themselves. Chunks that carried no token are dropped."""
    last = 0
    seen = False
    exact = True
    for value, n in zip(cumulative, chars, strict=True):
        if value is None:
            if n:
                exact = False
            continue
        if type(value) is not int or value < 0:
            raise UsageProblem(ErrorKind.BAD_USAGE, f"completion_tokens is {value!r}, not a count")
        if value < last:
            raise UsageProblem(ErrorKind.BAD_USAGE, f"completion_tokens went down from {last} to {value}")
        last = value
        seen = True
    if not seen:
        raise UsageProblem(ErrorKind.MISSING_USAGE, "the server reported no completion_tokens")
    if last == 0 and any(chars):
        raise UsageProblem(ErrorKind.BAD_USAGE, "the server reported 0 completion tokens for streamed text")
    if exact:
        return _exact(times, cumulative)
    return _spread(times, chars, cumulative, last)


def _exact(times: Sequence[float], cumulative: Sequence[int | None]) -> ChunkTokens:
    out_t: list[float] = []
    out_n: list[int] = []
    previous = 0
    for t, value in zip(times, cumulative, strict=True):
        if value is not None and value > previous:
            out_t.append(t)
            out_n.append(value - previous)
            previous = value
    return ChunkTokens(tuple(out_t), tuple(out_n), True)


def _spread(times: Sequence[float], chars: Sequence[int], cumulative: Sequence[int | None],
            total: int) -> ChunkTokens:
    text = [(t, n) for t, n in zip(times, chars, strict=True) if n > 0]
    if not text:  # tokens but no visible text: they arrived with the last count
        at = next(t for t, v in zip(reversed(times), reversed(cumulative), strict=True) if v)
        return ChunkTokens((at,), (total,), False)
    base = 1 if total >= len(text) else 0
    rest = total - base * len(text)
    weight = sum(n for _, n in text)
    shares = [rest * n / weight for _, n in text]
    counts = [base + int(s) for s in shares]
    # Largest remainders get the tokens lost to rounding down, so the counts add up to the total.
    missing = total - sum(counts)
    for i in sorted(range(len(text)), key=lambda i: shares[i] - int(shares[i]), reverse=True)[:missing]:
        counts[i] += 1
    kept = [(t, c) for (t, _), c in zip(text, counts, strict=True) if c > 0]
    return ChunkTokens(tuple(t for t, _ in kept), tuple(c for _, c in kept), False)
