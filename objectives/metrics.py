"""The phase metrics, one function each, with its formula. Definitions follow sglang.bench_serving
where the two overlap (see docs/metrics.md); where they differ the docstring says so and why.

Every function takes the phase's records and, where time matters, the measured window ``[0,
window_s]`` (seconds since the measured part started; records' ``start_s`` are on the same clock). A
function returns None when its metric is undefined (e.g. no successful request).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from objectives.records import RequestRecord


@dataclass(frozen=True, slots=True)
class Summary:
    """mean, p50, p90, p99 of a sample (numpy's linear-interpolation percentiles, as
    bench_serving)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None

    @staticmethod
    def of(values: Sequence[float] | np.ndarray, scale: float = 1.0) -> Summary:
        data = np.asarray(values, dtype=float)
        if data.size == 0:
            return Summary(None, None, None, None)
        p50, p90, p99 = np.percentile(data, [50, 90, 99]) * scale
        return Summary(float(data.mean() * scale), float(p50), float(p90), float(p99))

    @staticmethod
    def weighted(values: np.ndarray, weights: np.ndarray, scale: float = 1.0) -> Summary:
        """``of(np.repeat(values, weights))`` without building the repeated sample: memory stays one
        entry per value however large the (integer, positive) weights are. Same linear interpolation
        as numpy."""
        v = np.asarray(values, dtype=float)
        w = np.asarray(weights, dtype=np.int64)
        if v.size == 0:
            return Summary(None, None, None, None)
        order = np.argsort(v, kind="stable")
        v, w = v[order], w[order]
        # the repeated sample's element k has value v[i] for ends[i-1] <= k < ends[i]
        ends = np.cumsum(w)
        n = int(ends[-1])
        out = []
        for q in (50, 90, 99):
            h = (n - 1) * q / 100
            lo = int(np.floor(h))
            hi = min(lo + 1, n - 1)
            a, b = (v[np.searchsorted(ends, lo, side="right")],
                    v[np.searchsorted(ends, hi, side="right")])
            out.append(float((a + (h - lo) * (b - a)) * scale))
        return Summary(float(np.dot(v, w) / n * scale), out[0], out[1], out[2])


def _ok(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.ok]


def on_server_schedule(
        records: Sequence[RequestRecord]) -> tuple[list[RequestRecord], float] | None:
    """The records on the server's own schedule (``RequestRecord.server_*``: a simulator stamps its
    events), with the window from the first arrival to the last completion; None unless some request
    succeeded, every successful one was stamped and none was cancelled (a drained ``n``-phase).

    At time scale X every real millisecond the host spends — sending C requests, reading late chunks
    — is X simulated ones, so a busy machine's figures from arrival times measure the host. The
    schedule's figures are the model's, whatever the load (docs/metrics.md, "Whose clock"). A failed
    request has no schedule of its own: it keeps its client times, moved onto the schedule by the
    successful requests' median offset (it only counts in ``achieved_concurrency`` and the window's
    end)."""
    ok = [r for r in records if r.ok]
    if not ok or any(r.cancelled for r in records) \
            or any(r.server_start_s is None or not r.server_chunk_s for r in ok):
        return None
    first = min(r.server_start_s for r in ok if r.server_start_s is not None)
    shift = float(np.median([(r.server_start_s or 0.0) - first - r.start_s for r in ok]))
    out = [dataclasses.replace(r, start_s=(r.server_start_s or 0.0) - first,
                               chunk_times_s=r.server_chunk_s, end_s=r.server_chunk_s[-1]) if r.ok
           else dataclasses.replace(r, start_s=max(0.0, r.start_s + shift)) for r in records]
    return out, max(r.start_s + r.end_s for r in out)


def tokens_in_window(records: Sequence[RequestRecord], window_s: float) -> int:
    """Σ output tokens that arrived inside the window, over successful and still-running requests.

    Counting by arrival time (not per finished request) lets a phase stop while requests are in
    flight without losing their tokens or counting tokens from after the window. Failed requests do
    not count: nobody got a usable answer from them.
    """
    total = 0
    for r in records:
        if r.error_kind is not None:
            continue
        if r.start_s + r.end_s <= window_s:
            total += r.output_tokens
        else:
            horizon = window_s - r.start_s
            total += sum(n for t, n in zip(r.chunk_times_s, r.chunk_tokens, strict=True)
                         if t <= horizon)
    return total


def aggregate_tok_s(records: Sequence[RequestRecord], window_s: float) -> float | None:
    """Output throughput = tokens_in_window / window. bench_serving's "Output token throughput" is
    Σ output tokens / duration; the same when no request is left running at the end of the
    window."""
    if window_s <= 0:
        return None
    return tokens_in_window(records, window_s) / window_s


def request_rate(records: Sequence[RequestRecord], window_s: float) -> float | None:
    """Request throughput = successful requests completed / window (bench_serving: completed /
    duration)."""
    if window_s <= 0:
        return None
    return len(_ok(records)) / window_s


def achieved_concurrency(records: Sequence[RequestRecord], window_s: float) -> float | None:
    """Σ time each request was in flight inside the window / window. bench_serving's "Concurrency"
    is Σ E2E / duration; clipping to the window keeps requests still running at the end from
    inflating it. Close to the phase's C in a healthy closed loop; lower means the client could not
    keep C in flight."""
    if window_s <= 0:
        return None
    busy = 0.0
    for r in records:
        busy += max(0.0, min(r.start_s + r.end_s, window_s) - max(r.start_s, 0.0))
    return busy / window_s


def decode_tok_s(record: RequestRecord) -> float | None:
    """One request's decode speed = (output tokens − tokens of the first chunk) / (last chunk −
    first chunk).

    Prefill and queueing are excluded (they are the TTFT), so at C=1 this is the speed a user
    watches the answer stream at. It equals bench_serving's 1000 / TPOT when the first chunk carries
    one token (SGLang's usual case) and stays exact when it carries more. Undefined with fewer than
    two chunks.
    """
    times = record.chunk_times_s
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return (record.output_tokens - record.chunk_tokens[0]) / (times[-1] - times[0])


def per_request_tok_s(records: Sequence[RequestRecord]) -> list[float]:
    return [v for v in (decode_tok_s(r) for r in _ok(records)) if v is not None]


def ttft_s(records: Sequence[RequestRecord]) -> list[float]:
    """TTFT = time from sending the request to the first chunk carrying an output token."""
    return [r.chunk_times_s[0] for r in _ok(records) if r.chunk_times_s]


def e2e_s(records: Sequence[RequestRecord]) -> list[float]:
    """E2E latency = time from sending the request to the end of its stream (``[DONE]``)."""
    return [r.end_s for r in _ok(records)]


def tpot_s(records: Sequence[RequestRecord]) -> list[float]:
    """TPOT = (E2E − TTFT) / (output tokens − 1), per request with at least two tokens (as
    bench_serving)."""
    return [(r.end_s - r.chunk_times_s[0]) / (r.output_tokens - 1)
            for r in _ok(records) if r.chunk_times_s and r.output_tokens > 1]


def itl_s(records: Sequence[RequestRecord]) -> np.ndarray:
    """ITL = each inter-chunk gap divided by the tokens of the chunk that ended it, counted once per
    token.

    This is bench_serving's native-backend definition: a speculative step delivering k tokens after
    a gap g contributes k samples of g / k, so the ITL distribution is per token, not per chunk.
    """
    gaps: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for r in _ok(records):
        if len(r.chunk_times_s) > 1:
            tokens = np.asarray(r.chunk_tokens[1:], dtype=float)
            gaps.append(np.diff(np.asarray(r.chunk_times_s)) / tokens)
            weights.append(tokens.astype(int))
    if not gaps:
        return np.empty(0)
    return np.repeat(np.concatenate(gaps), np.concatenate(weights))


def itl_summary(records: Sequence[RequestRecord], scale: float = 1.0) -> Summary:
    """``Summary.of(itl_s(records))`` in memory proportional to chunks, not tokens: each gap is one
    value weighted by its chunk's tokens."""
    gaps: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for r in _ok(records):
        if len(r.chunk_times_s) > 1:
            tokens = np.asarray(r.chunk_tokens[1:], dtype=np.int64)
            gaps.append(np.diff(np.asarray(r.chunk_times_s)) / tokens)
            weights.append(tokens)
    if not gaps:
        return Summary(None, None, None, None)
    return Summary.weighted(np.concatenate(gaps), np.concatenate(weights), scale)


def tokens_per_chunk(records: Sequence[RequestRecord]) -> float | None:
    """Mean output tokens per chunk after the first = the client's view of the speculative accept
    length (one chunk per decode step at SGLang's default ``--stream-interval 1``). A cross-check of
    the server-side accept length; meaningful only with exact per-chunk counts."""
    chunks = tokens = 0
    for r in _ok(records):
        if r.tokens_exact and len(r.chunk_tokens) > 1:
            chunks += len(r.chunk_tokens) - 1
            tokens += r.output_tokens - r.chunk_tokens[0]
    return tokens / chunks if chunks else None


def errors_by_kind(records: Sequence[RequestRecord]) -> dict[str, int]:
    """How many measured requests failed, per ``ErrorKind`` (requests cancelled at a normal stop are
    not)."""
    counts = Counter(str(r.error_kind) for r in records if r.error_kind is not None)
    return dict(sorted(counts.items()))


def error_rate(records: Sequence[RequestRecord]) -> float | None:
    """Failed / (successful + failed) measured requests; requests cancelled at a normal stop are
    neither."""
    finished = [r for r in records if not r.cancelled]
    if not finished:
        return None
    return sum(1 for r in finished if r.error_kind is not None) / len(finished)
