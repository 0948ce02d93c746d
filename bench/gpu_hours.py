"""The cost side of bench/sample_efficiency.py: simulated GPU-hours to reach 0.98 of the optimum, and how many
times fewer trials the default needs than random search and the one-flag sweep.

A study's trials are costed by tuner/engine/cost.py: the start-up its landscape models (the simulator's
start-up model for the built-in landscape, through ``deploy()``'s timings; the same model of the study's
profile for a landscape that models none) + its benchmark at the speeds it measured, × the GPUs it holds,
summed up to the first trial after which the study's own pick is ≥ 0.98 of the optimum.

The seed campaign's manual method is the one-flag sweep costed as that person worked (../shared/seed/, as
docs/benchmarks.md "GPU-hours to the optimum" describes): after every restart a fixed ``sleep 100`` before
the first request (a failed start is noticed then, and costs the 100 s), then their own benchmark —
five concurrency levels from 1 to 64 (1, 4, 16, 32, 64), 512 output tokens, temperature 0, ignore_eos.
The request count per level is not in the record: ``SEED_WAVES`` waves of C requests per level (+ one warm-up
request, bench_serving's default) make a cycle of 11 minutes at the seed's own measured speeds (277 tok/s at
C=1, 1817 tok/s at C=64; 100 s + 9.5 min of benchmark), inside the 10–15 minutes a point the record reports
for stop, edit, deploy, wait and benchmark. Its levels between 1 and 64 are costed from the C=1 and C=64
speeds a trial measured (tuner/engine/cost.py: a saturating curve, so never longer than the real benchmark).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from objectives.spec import BenchmarkSpec, PhaseSpec, WorkloadSpec
from tuner.engine.cost import CostModel, study_startup
from tuner.engine.record import TrialRecord
from tuner.study.spec import StudySpec

SEED_WAIT_S = 100.0
SEED_LEVELS = (1, 4, 16, 32, 64)
SEED_WAVES = 16
SEED_BENCHMARK = BenchmarkSpec(
    WorkloadSpec(dataset="synthetic", input_tokens=256, max_tokens=512, temperature=0.0, ignore_eos=True),
    tuple(PhaseSpec(c, requests=SEED_WAVES * c, warmup=1) for c in SEED_LEVELS))
#: A seed that never reached the target: sorts after every real figure, so a median over it reads "not reached".
NOT_REACHED = 1e12


@dataclass(frozen=True)
class Spend:
    """One search's GPU-hours: to the first trial at the target, or everything it spent (``reached`` False)."""

    gpu_hours: float
    reached: bool
    spent: float  # GPU-hours of the whole search
    trials: int  # measured trials of the whole search

    @property
    def ranked(self) -> float:
        """The figure a median is taken of: a search that never got there ranks after every one that did."""
        return self.gpu_hours if self.reached else NOT_REACHED


def study_cost(spec: StudySpec) -> CostModel:
    """The product's accounting for this study's trials."""
    return CostModel(spec.benchmark, default_startup=study_startup(spec))


def seed_cost() -> CostModel:
    """The seed campaign's: a fixed 100 s wait per restart and its own five-level benchmark."""
    return CostModel(SEED_BENCHMARK, wait_s=SEED_WAIT_S)


def spend(model: CostModel, records: Sequence[TrialRecord], reached_at: int | None) -> Spend:
    """GPU-hours up to and including measured trial ``reached_at`` (1-based), or all of them when None."""
    cumulative = model.cumulative_gpu_hours(records)
    spent = cumulative[-1] if cumulative else 0.0
    if reached_at is None or reached_at > len(cumulative):
        return Spend(spent, False, spent, len(cumulative))
    return Spend(cumulative[reached_at - 1], True, spent, len(cumulative))


def hours_cell(median: float, low: float, high: float, spends: Sequence[Spend]) -> str:
    """``median [low, high]`` in GPU-hours; "not reached" where the figure is a search that never got there
    (then the GPU-hours the median search spent)."""
    def one(value: float) -> str:
        return "not reached" if value >= NOT_REACHED / 2 else f"{value:.2f}"

    text = f"{one(median)} [{one(low)}, {one(high)}]"
    if median >= NOT_REACHED / 2:
        text += f"; spent {float(np.median([s.spent for s in spends])):.2f}"
    return text


def ratio_cell(auto: tuple[float, float, float], other: tuple[float, float, float], auto_budget: int,
               other_budget: int) -> str:
    """How many times fewer trials the default needs to reach the target than ``other`` (median ÷ median, with
    the ratio of the interval ends that is least favourable to the default); "≥ X×" where ``other``'s median
    never reached it within its budget, "–" where the default's did not."""
    median, _, high = auto
    if median > auto_budget:
        return "– (default not reached)"
    other_median, other_low, _ = other
    if other_median > other_budget:
        return f"≥ {other_median / median:.1f}×"
    return f"{other_median / median:.1f}× (≥ {other_low / high:.1f}×)"
