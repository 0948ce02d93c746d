"""``[benchmark] ci_target``: the precision a study asks of each trial's score, turned into request
counts.

A trial's score interval is paired with the reference run's same requests (objectives/paired.py), so
its half-width is about ``√Σ_c (w_c · t(n_c − 1) · σ_c / √n_c)²`` for weights w_c (summing to 1),
n_c requests and σ_c the spread of one request's paired log ratio in phase c. Giving each weighted
phase an equal share of the target, phase c needs the smallest n with ``t(n − 1) · w_c · σ_c · √k /
√n ≤ ci_target`` (k weighted phases).

The counts must be fixed before the reference run is measured (every trial pairs its requests with
the reference's), so σ_c is what the simulated demo measured (bench/paired_precision.py: a C=1
request's decode speed ratio varies by about 3 %, a C=64 request's tokens/busy-time ratio by about
15 %); ``spectune trials`` then shows what each score's interval really is. A phase's own
``requests`` is a floor, never lowered; a phase never measures fewer than MIN_PAIRS requests, and at
C > 1 not fewer than one full wave (C).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from scipy import stats

from objectives.confidence import CONFIDENCE
from objectives.paired import MIN_PAIRS
from objectives.spec import PhaseSpec

#: One request's paired log-ratio spread (σ): C=1 decode speed, C>1 tokens per busy second.
PRIOR_SPREAD_C1 = 0.03
PRIOR_SPREAD_LOADED = 0.15
#: The most requests ci_target asks of one phase (the study file's own bound on counts).
MAX_REQUESTS = 100_000


def spread(concurrency: int) -> float:
    return PRIOR_SPREAD_C1 if concurrency == 1 else PRIOR_SPREAD_LOADED


def needed_requests(target: float, weight: float, concurrency: int, weighted_phases: int) -> int:
    """The fewest requests for which this phase's share of the score's half-width is within
    ``target``."""
    minimum = MIN_PAIRS if concurrency == 1 else max(MIN_PAIRS, concurrency)
    if weight <= 0:
        return minimum
    scale = weight * spread(concurrency) * math.sqrt(weighted_phases) / target
    # the normal quantile first; t(n − 1) is larger
    n = max(minimum, math.ceil((1.96 * scale) ** 2))
    while n < MAX_REQUESTS and stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1) * scale / math.sqrt(n) > 1:
        n += 1
    return n


def with_target(phases: Sequence[PhaseSpec], weights: Mapping[int, float], target: float,
                stated: Sequence[int | None]) -> tuple[PhaseSpec, ...]:
    """``phases`` with their request counts set by ``target`` (a phase's stated count is a
    floor)."""
    total = sum(w for w in weights.values() if w > 0) or 1.0
    weighted = sum(1 for w in weights.values() if w > 0) or 1
    out = []
    for phase, own in zip(phases, stated, strict=True):
        if phase.requests is None:  # a timed phase: its duration decides
            out.append(phase)
            continue
        needed = needed_requests(target, weights.get(phase.concurrency, 0.0) / total,
                                 phase.concurrency, weighted)
        out.append(dataclasses.replace(phase, requests=max(needed, own or 0)))
    return tuple(out)
