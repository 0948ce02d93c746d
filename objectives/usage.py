"""Per-chunk output-token counts from what the server reported while streaming.

Two cases. Exact: every chunk that carried text also carried the cumulative completion-token count,
so each chunk's count is the difference from the previous one (OpenAI APIs with continuous usage,
and the native ``/generate``). Spread: the server gave only a final total; it is divided over the
text chunks in proportion to their characters (each chunk gets at least one token while the total
allows), which keeps the total exact and the TTFT right, and approximates the split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from objectives.records import ErrorKind

#: Completion tokens a server may report beyond ``max_tokens`` before the count is implausible: a
#: stop token counted on top, or a speculative step not cut exactly at the limit. 2·10⁸ for a
#: 512-token request is a lie, and believing it costs memory and reports an absurd throughput as
#: valid.
MAX_TOKENS_SLACK = 32
#: The bound when the request's ``max_tokens`` is unknown: no context window holds this many tokens.
ABSOLUTE_MAX_TOKENS = 10_000_000


def token_limit(max_tokens: int | None) -> int:
    """The most completion tokens one answer may plausibly claim (see ``MAX_TOKENS_SLACK``)."""
    if max_tokens is None:
        return ABSOLUTE_MAX_TOKENS
    return min(max(max_tokens, 0) + MAX_TOKENS_SLACK, ABSOLUTE_MAX_TOKENS)


def count_problem(value: object, limit: int, name: str = "completion_tokens") -> str | None:
    """Why ``value`` is not a plausible token count from the server, or None when it is one.

    JSON gives us bool, float (also NaN and ±inf: Python's json accepts them), huge ints and
    strings; only a plain int in ``[0, limit]`` is a count."""
    if type(value) is not int:
        return f"{name} is {_short(value)}, not a count"
    if value < 0:
        return f"{name} is {value}, a negative count"
    if value > limit:
        return f"{name} is {_short(value)}, more than the request allows ({limit})"
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


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


def chunk_tokens(times: Sequence[float], cumulative: Sequence[int | None], chars: Sequence[int],
                 limit: int = ABSOLUTE_MAX_TOKENS) -> ChunkTokens:
    """Token counts for the chunks observed at ``times``; raises ``UsageProblem`` when the server's
    counts are missing, implausible (beyond ``limit``, see ``token_limit``) or contradict
    themselves. Chunks that carried no token are dropped."""
    last = 0
    seen = False
    exact = True
    for value, n in zip(cumulative, chars, strict=True):
        if value is None:
            if n:
                exact = False
            continue
        problem = count_problem(value, limit)
        if problem is not None:
            raise UsageProblem(ErrorKind.BAD_USAGE, problem)
        if value < last:
            raise UsageProblem(ErrorKind.BAD_USAGE,
                               f"completion_tokens went down from {last} to {value}")
        last = value
        seen = True
    if not seen:
        raise UsageProblem(ErrorKind.MISSING_USAGE, "the server reported no completion_tokens")
    if last == 0 and any(chars):
        raise UsageProblem(ErrorKind.BAD_USAGE,
                           "the server reported 0 completion tokens for streamed text")
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
    for i in sorted(range(len(text)), key=lambda i: shares[i] - int(shares[i]),
                    reverse=True)[:missing]:
        counts[i] += 1
    kept = [(t, c) for (t, _), c in zip(text, counts, strict=True) if c > 0]
    return ChunkTokens(tuple(t for t, _ in kept), tuple(c for _, c in kept), False)
