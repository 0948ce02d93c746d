"""The cost side of bench/sample_efficiency.py: simulated GPU-hours to reach 0.98 of the optimum,
and how many times fewer trials the default needs than random search and the one-flag sweep.

A study's trials are costed by tuner/evaluation/cost.py: the start-up its landscape models (the
simulator's start-up model for the built-in landscape, through ``deploy()``'s timings; the same
model of the study's profile for a landscape that models none) + its benchmark at the speeds it
measured, × the GPUs it holds, summed up to the first trial after which the study's own pick is ≥
0.98 of the optimum.

The seed campaign's manual method is the one-flag sweep costed as that person worked
(docs/benchmarks.md, "GPU-hours to the optimum"): after every restart a fixed ``sleep 100`` before
the first request (a failed start is noticed then, and costs the 100 s), then their own benchmark —
five concurrency levels from 1 to 64 (1, 4, 16, 32, 64), 512 output tokens, temperature 0,
ignore_eos. The request count per level is not in the record: ``SEED_WAVES`` waves of C requests per
level (+ one warm-up request, bench_serving's default) make a cycle of 11 minutes at the seed's own
measured speeds (277 tok/s at C=1, 1817 tok/s at C=64; 100 s + 9.5 min of benchmark), inside the
10–15 minutes a point the record reports for stop, edit, deploy, wait and benchmark. Its levels
between 1 and 64 are costed from the C=1 and C=64 speeds a trial measured (tuner/evaluation/cost.py:
a saturating curve, so never longer than the real benchmark).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from objectives.spec import BenchmarkSpec, PhaseSpec, WorkloadSpec
from tuner.evaluation.cost import CostModel, study_startup
from tuner.store.record import TrialRecord
from tuner.study.spec import StudySpec

SEED_WAIT_S = 100.0
SEED_LEVELS = (1, 4, 16, 32, 64)
SEED_WAVES = 16
SEED_BENCHMARK = BenchmarkSpec(
    WorkloadSpec(dataset="synthetic", input_tokens=256, max_tokens=512, temperature=0.0,
                 ignore_eos=True),
    tuple(PhaseSpec(c, requests=SEED_WAVES * c, warmup=1) for c in SEED_LEVELS))
#: A seed that never reached the target: sorts after every real figure, so a median over it reads
#: "not reached".
NOT_REACHED = 1e12

# ratio to the optimum after each measured trial; those trials
Run = tuple[list[float], list[TrialRecord]]
Interval = Callable[[list[float]], tuple[float, float, float]]  # median, low, high


@dataclass(frozen=True)
class Spend:
    """One search's GPU-hours: to the first trial at the target, or everything it spent (``reached``
    False)."""

    gpu_hours: float
    reached: bool
    spent: float  # GPU-hours of the whole search
    trials: int  # measured trials of the whole search

    @property
    def ranked(self) -> float:
        """The figure a median is taken of: a search that never got there ranks after every one that
        did."""
        return self.gpu_hours if self.reached else NOT_REACHED


def study_cost(spec: StudySpec) -> CostModel:
    """The product's accounting for this study's trials."""
    return CostModel(spec.benchmark, default_startup=study_startup(spec))


def seed_cost() -> CostModel:
    """The seed campaign's: a fixed 100 s wait per restart and its own five-level benchmark."""
    return CostModel(SEED_BENCHMARK, wait_s=SEED_WAIT_S)


@dataclass(frozen=True)
class HoursRow:
    landscape: str
    method: str
    budget: int
    target_name: str  # the ratio to the optimum searched for
    spends: tuple[Spend, ...]  # per seed


def landscape_hours(name: str, spec: StudySpec, runs: Mapping[str, tuple[int, list[Run]]],
                    target: float) -> list[HoursRow]:
    """GPU-hours rows of one landscape: every method to ``target``, the sweep also at the seed's
    costs; and, where the sweep ran, every method to the sweep's own answer (what the seed's method
    gives for its hours): seed by seed, the ratio the sweep of that seed ended at."""
    n = min(len(method_runs) for _, method_runs in runs.values())
    goals = [([target] * n, f"≥ {target:g}")]
    if "sweep" in runs:
        ends = [ratios[-1] - 1e-9 for ratios, _ in runs["sweep"][1][:n]]  # exactly where it stopped
        goals.append((ends, f"the sweep's answer ({min(ends):.3f}–{max(ends):.3f})"))
    rows = []
    for per_seed, goal_name in goals:
        for method, (budget, method_runs) in runs.items():
            models = [("", study_cost(spec))] + ([(", the seed's costs", seed_cost())]
                                                 if method == "sweep" else [])
            for suffix, model in models:
                spends = tuple(spend(model, records, first_at(ratios, goal))
                               for (ratios, records),
                               goal in zip(method_runs, per_seed, strict=False))
                rows.append(HoursRow(name, method + suffix, budget, goal_name, spends))
    return rows


def first_at(ratios: Sequence[float], target: float) -> int | None:
    """The 1-based measured trial after which the pick is first ≥ ``target`` (None: never)."""
    return next((i + 1 for i, r in enumerate(ratios) if r >= target), None)


def hours_table(rows: Sequence[HoursRow], interval: Interval) -> list[str]:
    """Markdown: median simulated GPU-hours to each row's target [90 % interval], per landscape and
    method."""
    out = ["| landscape | to | method | budget | GPU-hours [90 % CI] | seeds reaching it | "
           "GPU-hours per trial |",
           "|---|---|---|---|---|---|---|"]
    for row in rows:
        cell = interval([s.ranked for s in row.spends])
        per_trial = float(np.median([s.spent / max(s.trials, 1) for s in row.spends]))
        out.append(f"| {row.landscape} | {row.target_name} | {row.method} | {row.budget} | "
                   f"{hours_cell(*cell, row.spends)} | "
                   f"{sum(s.reached for s in row.spends)}/{len(row.spends)} | {per_trial:.3f} |")
    return out


def ratio_table(reach: Mapping[tuple[str, str], tuple[tuple[float, float, float], int]], first: str,
                target: float) -> list[str]:
    """Markdown: how many times fewer trials ``first`` (the default) needs to reach ``target`` than
    random search and the sweep. ``reach``: (landscape, method) → (median, low, high trials,
    budget+1 where never), budget."""
    others = [o for o in ("random", "sweep") if any(method == o for _, method in reach)]
    if not others or first in others:
        return []
    out = [f"| landscape | {first}: trials to ≥{target:g} | "
           + " | ".join(f"{o}: trials (budget) | {first} vs {o}" for o in others) + " |",
           "|---|---|" + "---|---|" * len(others)]
    for name in dict.fromkeys(landscape for landscape, _ in reach):
        auto, auto_budget = reach[(name, first)]
        cells = [trials_text(auto, auto_budget)]
        for o in others:
            if (name, o) in reach:
                cell, budget = reach[(name, o)]
                cells += [f"{trials_text(cell, budget)} ({budget})",
                          ratio_cell(auto, cell, auto_budget, budget)]
            else:
                cells += ["–", "–"]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def trials_text(cell: tuple[float, float, float], budget: int) -> str:
    median, low, high = (f">{budget}" if v > budget else f"{v:g}" for v in cell)
    return f"{median} [{low}, {high}]"


def spend(model: CostModel, records: Sequence[TrialRecord], reached_at: int | None) -> Spend:
    """GPU-hours up to and including measured trial ``reached_at`` (1-based), or all of them when
    None."""
    cumulative = model.cumulative_gpu_hours(records)
    spent = cumulative[-1] if cumulative else 0.0
    if reached_at is None or reached_at > len(cumulative):
        return Spend(spent, False, spent, len(cumulative))
    return Spend(cumulative[reached_at - 1], True, spent, len(cumulative))


def hours_cell(median: float, low: float, high: float, spends: Sequence[Spend]) -> str:
    """``median [low, high]`` in GPU-hours; "not reached" where the figure is a search that never
    got there (then the GPU-hours the median search spent)."""
    def one(value: float) -> str:
        return "not reached" if value >= NOT_REACHED / 2 else f"{value:.2f}"

    text = f"{one(median)} [{one(low)}, {one(high)}]"
    if median >= NOT_REACHED / 2:
        text += f"; spent {float(np.median([s.spent for s in spends])):.2f}"
    return text


def ratio_cell(auto: tuple[float, float, float], other: tuple[float, float, float],
               auto_budget: int, other_budget: int) -> str:
    """How many times fewer trials the default needs to reach the target than ``other`` (median ÷
    median, with the ratio of the interval ends that is least favourable to the default); "≥ X×"
    where ``other``'s median never reached it within its budget, "–" where the default's did not."""
    median, _, high = auto
    if median > auto_budget:
        return "– (default not reached)"
    other_median, other_low, _ = other
    if other_median > other_budget:
        return f"≥ {other_median / median:.1f}×"
    return f"{other_median / median:.1f}× (≥ {other_low / high:.1f}×)"
