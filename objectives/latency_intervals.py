"""95 % intervals of the latency figures shown beside the throughput: TTFT p50 and p99, ITL mean.

A percentile has no closed-form interval worth trusting at a few hundred requests, so each comes
from a bootstrap over the phase's successful requests (``scipy.stats.bootstrap``, percentile
method, a fixed seed: the same records always give the same interval). The request is the unit
resampled: an ITL's gaps are correlated within their request (one request's acceptance sets all of
them), so the ITL mean — Σ gaps ÷ Σ tokens after the first chunk, as ``metrics.itl_summary`` —
resamples whole requests with their gaps.

These intervals describe the request-to-request spread of one run, like the throughput's
(objectives/confidence.py). A p99 over a handful of requests is close to their maximum, and its
interval is correspondingly wide.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

from objectives.records import RequestRecord

#: The latency figures that carry an interval, stored as ``<name>_ci = [low, high]`` in ms.
LATENCY_INTERVALS = ("ttft_p50_ms", "ttft_p99_ms", "itl_mean_ms")
RESAMPLES = 2000
#: Resamples evaluated at once: memory stays RESAMPLE_BATCH × requests floats.
RESAMPLE_BATCH = 250
SEED = 0


def latency_intervals(records: Sequence[RequestRecord],
                      scale: float = 1000.0) -> dict[str, tuple[float, float]]:
    """``{name: (low, high)}`` for each of ``LATENCY_INTERVALS`` the records can give (two or more
    successful requests), in the records' unit × ``scale`` (seconds → ms)."""
    ok = [r for r in records if r.ok and r.chunk_times_s]
    out: dict[str, tuple[float, float]] = {}
    ttft = np.asarray([r.chunk_times_s[0] for r in ok], dtype=float)
    for name, q in (("ttft_p50_ms", 50.0), ("ttft_p99_ms", 99.0)):
        interval = _bootstrap((ttft,), lambda x, axis, q=q: np.percentile(x, q, axis=axis))
        if interval is not None:
            out[name] = (interval[0] * scale, interval[1] * scale)
    streamed = [r for r in ok if len(r.chunk_times_s) > 1]
    gaps = np.asarray([r.chunk_times_s[-1] - r.chunk_times_s[0] for r in streamed], dtype=float)
    tokens = np.asarray([sum(r.chunk_tokens[1:]) for r in streamed], dtype=float)
    if tokens.size and (tokens > 0).all():
        interval = _bootstrap((gaps, tokens),
                              lambda g, t, axis: g.sum(axis=axis) / t.sum(axis=axis), paired=True)
        if interval is not None:
            out["itl_mean_ms"] = (interval[0] * scale, interval[1] * scale)
    return out


def _bootstrap(data: tuple[np.ndarray, ...], statistic: Callable[..., np.ndarray], *,
               paired: bool = False) -> tuple[float, float] | None:
    if data[0].size < 2:
        return None
    if all(np.ptp(d) == 0 for d in data):
        value = float(statistic(*(d[None, :] for d in data), axis=-1)[0])
        return (value, value)  # every request alike: nothing to resample
    with warnings.catch_warnings():
        # a resample of identical values (few requests) is expected, not a problem
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(data, statistic, paired=paired, vectorized=True,
                                 n_resamples=RESAMPLES, batch=RESAMPLE_BATCH,
                                 confidence_level=0.95, method="percentile",
                                 random_state=np.random.default_rng(SEED))
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):
        return None
    return (low, high)
