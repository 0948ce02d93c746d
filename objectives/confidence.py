"""How precisely has a phase measured its figures? 95 % intervals, and when a phase may stop early.

Two kinds of interval, for two uses:

- **The figure's interval** (``MeanSample``, ``RatioSample``): from the request-level data, stored
  with the phase as sufficient statistics, so repeated phases of one configuration pool exactly
  (sums add) and a simulator's time scale rescales them.

  - C=1's primary metric, the mean per-request decode speed, gets Student's t-interval over the
    per-request speeds: ``mean ± t(n−1) · s / √n``.
  - The aggregate throughput ``Σ tokens / window`` gets a ratio-estimator (delta-method) interval.
    Each request contributes its in-window output tokens y and its in-window busy time x; ``Σ x =
    achieved concurrency · window``, so ``aggregate = (Σy/Σx) · (Σx/window)`` exactly and the
    aggregate's relative uncertainty is that of ``R = Σy/Σx``: ``Var(R) ≈ Σ(y − R·x)² / ((n − 1) · n
    · x̄²)``. Requests that failed count with y = 0 (they took the server's time and delivered
    nothing), as they do in the aggregate itself.

  Both intervals describe the request-to-request spread (prompts, output lengths, acceptance); slow
  drift of a host between runs is what the confirmation stage's interleaved restarts are for
  (docs/scoring.md).

- **The early-stop check** (``relative_half_width``): batch means over time slices of the window
  while the phase runs — token arrivals of concurrent requests are correlated over about one
  request's lifetime, so slices much longer than that are nearly independent samples (the classic
  batch-means argument).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
from scipy import stats

from objectives.records import RequestRecord

#: The level of every interval spectune shows.
CONFIDENCE = 0.95
BATCHES = 10


@dataclass(frozen=True)
class Interval:
    """A closed interval [low, high] around an estimate."""

    low: float
    high: float

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high

    def to_list(self) -> list[float]:
        return [self.low, self.high]

    @property
    def mid(self) -> float:
        return (self.low + self.high) / 2

    def text(self, digits: int = 3) -> str:
        """``[0.961, 1.034]``: how every command prints an interval."""
        return f"[{self.low:.{digits}f}, {self.high:.{digits}f}]"

    @staticmethod
    def from_stored(value: Any) -> Interval | None:
        """A stored ``[low, high]`` (or None) → an Interval (or None)."""
        if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int | float)
                                                                       for v in value):
            return Interval(float(value[0]), float(value[1]))
        return None


def _t(n: int) -> float:
    """Student's t quantile for a two-sided CONFIDENCE interval from n observations (n − 1 degrees
    of freedom)."""
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1))


@dataclass(frozen=True)
class MeanSample:
    """Sufficient statistics of per-request values (n, Σv, Σv²): their mean and its t-interval."""

    n: int
    total: float
    total_sq: float

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray) -> MeanSample:
        v = np.asarray(values, dtype=float)
        return cls(int(v.size), float(v.sum()), float(np.dot(v, v)))

    @property
    def estimate(self) -> float | None:
        return self.total / self.n if self.n else None

    def interval(self) -> Interval | None:
        """The t-interval of the mean (``scipy.stats.t.interval``); None with fewer than two
        values."""
        if self.n < 2:
            return None
        mean = self.total / self.n
        variance = max(0.0, (self.total_sq - self.n * mean * mean) / (self.n - 1))
        if variance == 0.0:
            return Interval(mean, mean)
        low, high = stats.t.interval(CONFIDENCE, self.n - 1, loc=mean,
                                     scale=math.sqrt(variance / self.n))
        return Interval(float(low), float(high))

    def pooled(self, other: MeanSample) -> MeanSample:
        return MeanSample(self.n + other.n, self.total + other.total,
                          self.total_sq + other.total_sq)

    def scaled(self, factor: float) -> MeanSample:
        """Every value multiplied by ``factor``."""
        return MeanSample(self.n, self.total * factor, self.total_sq * factor * factor)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "mean", "n": self.n, "sum": self.total, "sum_sq": self.total_sq}


@dataclass(frozen=True)
class RatioSample:
    """Sufficient statistics of (y = tokens, x = busy seconds) per request, plus the window: the
    aggregate ``Σy / window`` and its ratio-estimator interval."""

    n: int
    sy: float
    sx: float
    syy: float
    sxx: float
    sxy: float
    window_s: float

    @classmethod
    def of(cls, y: Sequence[float] | np.ndarray, x: Sequence[float] | np.ndarray,
           window_s: float) -> RatioSample:
        ya, xa = np.asarray(y, dtype=float), np.asarray(x, dtype=float)
        return cls(int(ya.size), float(ya.sum()), float(xa.sum()), float(np.dot(ya, ya)),
                   float(np.dot(xa, xa)), float(np.dot(xa, ya)), float(window_s))

    @property
    def estimate(self) -> float | None:
        return self.sy / self.window_s if self.window_s > 0 else None

    def relative_half_width(self) -> float | None:
        """t · se(R) / R, the aggregate's relative half-width; None when undefined (under two
        requests, no tokens)."""
        if self.n < 2 or self.sx <= 0 or self.sy <= 0:
            return None
        ratio = self.sy / self.sx
        residual_ss = max(0.0, self.syy - 2 * ratio * self.sxy + ratio * ratio * self.sxx)
        x_mean = self.sx / self.n
        se = math.sqrt(residual_ss / (self.n - 1) / self.n) / x_mean
        return _t(self.n) * se / ratio

    def interval(self) -> Interval | None:
        estimate, relative = self.estimate, self.relative_half_width()
        if estimate is None or relative is None:
            return None
        return Interval(estimate * (1 - relative), estimate * (1 + relative))

    def pooled(self, other: RatioSample) -> RatioSample:
        return RatioSample(self.n + other.n, self.sy + other.sy, self.sx + other.sx,
                           self.syy + other.syy, self.sxx + other.sxx, self.sxy + other.sxy,
                           self.window_s + other.window_s)

    def scaled(self, time_factor: float) -> RatioSample:
        """Every duration multiplied by ``time_factor`` (tokens unchanged)."""
        f = time_factor
        return RatioSample(self.n, self.sy, self.sx * f, self.syy, self.sxx * f * f, self.sxy * f,
                           self.window_s * f)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "ratio", "n": self.n, "sy": self.sy, "sx": self.sx, "syy": self.syy,
                "sxx": self.sxx, "sxy": self.sxy, "window_s": self.window_s}


Sample = MeanSample | RatioSample


def sample_from_dict(stored: object) -> Sample | None:
    """A stored sample (``to_dict``) → the sample; None for anything else (e.g. a study from before
    intervals)."""
    if not isinstance(stored, Mapping):
        return None
    try:
        if stored.get("kind") == "mean":
            return MeanSample(int(stored["n"]), float(stored["sum"]), float(stored["sum_sq"]))
        if stored.get("kind") == "ratio":
            return RatioSample(int(stored["n"]),
                               *(float(stored[k]) for k in ("sy", "sx", "syy", "sxx", "sxy",
                                             "window_s")))
    except (KeyError, TypeError, ValueError):
        return None
    return None


def pool(samples: Iterable[Sample]) -> Sample | None:
    """The samples of repeated phases as one (their requests together); None when there are none or
    they mix kinds."""
    items = list(samples)
    means = [s for s in items if isinstance(s, MeanSample)]
    ratios = [s for s in items if isinstance(s, RatioSample)]
    if means and not ratios:
        return reduce(MeanSample.pooled, means)
    if ratios and not means:
        return reduce(RatioSample.pooled, ratios)
    return None


def aggregate_sample(records: Sequence[RequestRecord], window_s: float) -> RatioSample:
    """The (tokens, busy time) of every request inside ``[0, window_s]``: what ``aggregate_tok_s``
    is made of."""
    ys: list[float] = []
    xs: list[float] = []
    for r in records:
        busy = max(0.0, min(r.start_s + r.end_s, window_s) - max(r.start_s, 0.0))
        if busy <= 0:
            continue
        if r.error_kind is not None:
            tokens = 0
        elif r.start_s + r.end_s <= window_s:
            tokens = r.output_tokens
        else:
            horizon = window_s - r.start_s
            tokens = sum(n for t, n in zip(r.chunk_times_s, r.chunk_tokens, strict=True)
                         if t <= horizon)
        ys.append(tokens)
        xs.append(busy)
    return RatioSample.of(ys, xs, window_s)


def relative_half_width(arrivals: np.ndarray, tokens: np.ndarray, window_s: float) -> float | None:
    """Half-width of the 95 % CI of the mean throughput by batch means, as a fraction of the mean.

    ``arrivals`` are token-arrival times in seconds since the window started, ``tokens`` how many
    tokens each arrival carried. None when the window is empty or nothing arrived.
    """
    if window_s <= 0 or arrivals.size == 0:
        return None
    counts, _ = np.histogram(arrivals, bins=BATCHES, range=(0.0, window_s), weights=tokens)
    rates = counts / (window_s / BATCHES)
    mean = rates.mean()
    if mean <= 0:
        return None
    return float(_t(BATCHES) * rates.std(ddof=1) / np.sqrt(BATCHES) / mean)
