"""Paired measurement: a run's primary figure against the reference run's, request by request.

Every trial sends the same prompts in the same order (the same request index is the same prompt,
with the same sampling seed), so request i of a trial and request i of the reference run differ by
the configuration and by little else: the prompt's length, its output length and how predictable its
text is — the bulk of the request-to-request spread — are common to both (common random numbers). An
interval computed from the pairs describes only what differs; one computed from the two runs as
independent samples (objectives/confidence.py) counts the prompts' spread twice.

A phase keeps, per request index, what its primary metric is made of (``PerRequest``):

- C=1 (``mean``): each request's decode speed y. The ratio of means is compared through the
  per-request log ratios d_i = log(y_i / y_ref,i): Student's t-interval of their mean
  (``scipy.stats.ttest_1samp``), whose half-width is the relative uncertainty of the ratio.
- C>1 (``ratio``): each request's in-window tokens y and busy seconds x, the aggregate's ratio
  estimator ``Σy/Σx`` (objectives/confidence.py). The statistic log((Σy/Σx) / (Σy_ref/Σx_ref)) over
  the pairs gets its standard error from a paired bootstrap (``scipy.stats.bootstrap(...,
  paired=True)``, resampling pairs, a fixed seed so the same data give the same interval) and a
  t-interval from it.

``relative_interval`` returns the interval as factors of the point ratio (low ≤ 1 ≤ high); applied
to the run's own figure it is the figure's interval *relative to the reference run* (stored as
``<metric>_paired_ci``), which is what a score — a ratio to the reference — needs. The reference run
itself pairs with itself: [1, 1].
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

from objectives.confidence import CONFIDENCE
from objectives.metrics import decode_tok_s
from objectives.records import RequestRecord

Kind = Literal["mean", "ratio"]
#: Fewer pairs than this say nothing about the spread of the differences.
MIN_PAIRS = 3
BOOTSTRAP_RESAMPLES = 2000
_BOOTSTRAP_SEED = 20261202
#: Request indices of pooled runs: run k's request i becomes k·RUN_STRIDE + i (a phase's indices
#: stay below it).
RUN_STRIDE = 10**9
#: The key each primary metric's paired interval is stored under in a phase's metrics.
PAIRED_SUFFIX = "_paired_ci"


@dataclass(frozen=True)
class PerRequest:
    """One phase's per-request parts of its primary metric, by request index (successful requests
    only)."""

    kind: Kind
    index: tuple[int, ...]
    y: tuple[float, ...]
    x: tuple[float, ...] = ()  # ratio kind: busy seconds, one per request

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "index": list(self.index), "y": list(self.y)}
        if self.kind == "ratio":
            out["x"] = list(self.x)
        return out

    @staticmethod
    def from_dict(stored: Any) -> PerRequest | None:
        """A stored ``to_dict`` → the data; None for anything else (a study from before pairing)."""
        if not isinstance(stored, Mapping) or stored.get("kind") not in ("mean", "ratio"):
            return None
        try:
            index = tuple(int(i) for i in stored["index"])
            y = tuple(float(v) for v in stored["y"])
            x = tuple(float(v) for v in stored.get("x") or ()) if stored["kind"] == "ratio" else ()
        except (KeyError, TypeError, ValueError):
            return None
        if len(y) != len(index) or (stored["kind"] == "ratio" and len(x) != len(index)):
            return None
        return PerRequest(stored["kind"], index, y, x)

    def scaled(self, scale: float) -> PerRequest:
        """As a server ``scale`` times slower would have produced it: speeds divided, durations
        multiplied."""
        if self.kind == "mean":
            return PerRequest("mean", self.index, tuple(v / scale for v in self.y))
        return PerRequest("ratio", self.index, self.y, tuple(v * scale for v in self.x))


def speeds_of(records: Sequence[RequestRecord]) -> PerRequest:
    """C=1's parts: each successful request's decode speed (objectives.metrics.decode_tok_s)."""
    pairs = [(r.index, decode_tok_s(r)) for r in records if r.ok]
    kept = [(i, v) for i, v in pairs if v is not None and v > 0]
    return PerRequest("mean", tuple(i for i, _ in kept), tuple(v for _, v in kept))


def aggregate_parts_of(records: Sequence[RequestRecord], window_s: float) -> PerRequest:
    """C>1's parts: each successful request's in-window tokens and busy seconds (as
    ``aggregate_sample``)."""
    index: list[int] = []
    ys: list[float] = []
    xs: list[float] = []
    for r in records:
        if not r.ok:
            continue
        busy = max(0.0, min(r.start_s + r.end_s, window_s) - max(r.start_s, 0.0))
        if busy <= 0:
            continue
        index.append(r.index)
        ys.append(float(r.output_tokens))
        xs.append(busy)
    return PerRequest("ratio", tuple(index), tuple(ys), tuple(xs))


def pooled(runs: Iterable[PerRequest]) -> PerRequest | None:
    """Several runs of the same prompts as one sample, run k's request i indexed k·RUN_STRIDE + i —
    so that run k of one configuration pairs with run k of another. None without runs, or when their
    kinds differ."""
    items = list(runs)
    if not items or len({r.kind for r in items}) != 1:
        return None
    index = tuple(k * RUN_STRIDE + i for k, run in enumerate(items) for i in run.index)
    y = tuple(v for run in items for v in run.y)
    x = tuple(v for run in items for v in run.x)
    return PerRequest(items[0].kind, index, y, x)


def relative_interval(run: PerRequest, reference: PerRequest) -> tuple[float, float] | None:
    """The 95 % interval of run / reference over their common requests, as factors of the point
    ratio (low ≤ 1 ≤ high); None with fewer than MIN_PAIRS pairs or data of different kinds."""
    if run.kind != reference.kind:
        return None
    ref = dict(zip(reference.index, range(len(reference.index)), strict=True))
    mine = [(k, ref[i]) for k, i in enumerate(run.index) if i in ref]
    if len(mine) < MIN_PAIRS:
        return None
    a = np.array([k for k, _ in mine])
    b = np.array([j for _, j in mine])
    if run.kind == "mean":
        return _mean_interval(np.asarray(run.y)[a], np.asarray(reference.y)[b])
    return _ratio_interval(np.asarray(run.y)[a], np.asarray(run.x)[a], np.asarray(reference.y)[b],
                           np.asarray(reference.x)[b])


def _mean_interval(y: np.ndarray, y_ref: np.ndarray) -> tuple[float, float] | None:
    keep = (y > 0) & (y_ref > 0)
    d = np.log(y[keep] / y_ref[keep])
    if d.size < MIN_PAIRS:
        return None
    if np.ptp(d) == 0:
        return 1.0, 1.0
    low, high = stats.ttest_1samp(d, 0.0).confidence_interval(CONFIDENCE)
    centre = float(np.mean(d))
    return math.exp(float(low) - centre), math.exp(float(high) - centre)


def _log_ratio(y: np.ndarray, x: np.ndarray, y_ref: np.ndarray, x_ref: np.ndarray,
               axis: int = -1) -> np.ndarray:
    return np.asarray(np.log(y.sum(axis=axis) / x.sum(axis=axis)) - np.log(y_ref.sum(axis=axis) /
                                                                          x_ref.sum(axis=axis)))


def _ratio_interval(y: np.ndarray, x: np.ndarray, y_ref: np.ndarray,
                    x_ref: np.ndarray) -> tuple[float, float] | None:
    if y.sum() <= 0 or y_ref.sum() <= 0 or x.sum() <= 0 or x_ref.sum() <= 0:
        return None
    if np.allclose(y, y_ref) and np.allclose(x, x_ref):
        return 1.0, 1.0  # the reference run itself
    with warnings.catch_warnings():
        # scipy warns when every resample gives the same value (handled below)
        warnings.simplefilter("ignore")
        result = stats.bootstrap((y, x, y_ref, x_ref), _log_ratio, paired=True, vectorized=True,
                                 n_resamples=BOOTSTRAP_RESAMPLES, confidence_level=CONFIDENCE,
                                 method="percentile",
                                 random_state=np.random.default_rng(_BOOTSTRAP_SEED))
    se = float(result.standard_error)
    if not math.isfinite(se):
        return None
    # The bootstrap's standard error of the log ratio with Student's t quantile: symmetric around
    # the estimate in log space (a percentile interval need not contain the estimate when the pairs
    # are few and skewed).
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, y.size - 1)) * se
    return math.exp(-half), math.exp(half)


def paired_interval(value: float | None, run: PerRequest | None,
                    reference: PerRequest | None) -> list[float] | None:
    """The figure ``value``'s interval relative to the reference run (``[low, high]`` to store), or
    None."""
    if value is None or run is None or reference is None:
        return None
    factors = relative_interval(run, reference)
    if factors is None:
        return None
    return [value * factors[0], value * factors[1]]
