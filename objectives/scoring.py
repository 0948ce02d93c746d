"""Turning phase metrics into one score (or two objectives) and constraint violations.

Formula (docs/scoring.md): each weighted phase contributes its *primary metric* — per-request decode tok/s at
C=1 (what one user feels), aggregate output tok/s at C>1 (what the box delivers) — divided by the same metric
of a reference run, the study's baseline. With weights normalised to sum to 1:

    score = Σ_c  w_c · m_c / ref_c

so the baseline scores 1.0, 1.12 means "12 % better under these weights", and neither tok/s scale decides the
ranking by its size. Re-ranking with other weights needs only the stored metrics.

Constraints follow Optuna's convention: a value ≤ 0 is satisfied, > 0 is the amount of violation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from objectives.spec import ConstraintSpec

#: Constraint keys every trial sets (Optuna's GPSampler needs the same keys on every trial).
VALID_KEY = "valid configuration"
STARTED_KEY = "server started"

PhaseMetrics = Mapping[int, Mapping[str, Any]]


def primary_metric(concurrency: int) -> str:
    return "per_request_tok_s_mean" if concurrency == 1 else "aggregate_tok_s"


@dataclass(frozen=True)
class Scorer:
    """Weighted, baseline-normalised score over phases keyed by concurrency."""

    weights: Mapping[int, float]
    references: Mapping[int, float]

    @property
    def normalized_weights(self) -> dict[int, float]:
        total = sum(self.weights.values())
        return {c: w / total for c, w in self.weights.items() if w > 0}

    def score(self, metrics: PhaseMetrics) -> float | None:
        """The score, or None when a weighted phase has no value (failed or skipped)."""
        total = 0.0
        for concurrency, weight in self.normalized_weights.items():
            value = phase_value(metrics, concurrency)
            if value is None:
                return None
            total += weight * value / self.reference(concurrency)
        return total

    def optimistic_score(self, metrics: PhaseMetrics, bounds: Mapping[int, float]) -> float:
        """The best score this trial could still reach if every unmeasured phase hit ``bounds``."""
        total = 0.0
        for concurrency, weight in self.normalized_weights.items():
            value = phase_value(metrics, concurrency)
            if value is None:
                value = bounds.get(concurrency, 0.0)
            total += weight * value / self.reference(concurrency)
        return total

    def reference(self, concurrency: int) -> float:
        ref = self.references.get(concurrency)
        return ref if ref else 1.0


def phase_value(metrics: PhaseMetrics, concurrency: int) -> float | None:
    phase = metrics.get(concurrency)
    if phase is None:
        return None
    value = phase.get(primary_metric(concurrency))
    return float(value) if value is not None else None


def references_from(metrics: PhaseMetrics, weights: Mapping[int, float]) -> dict[int, float] | None:
    """Reference values from one measured run, or None if a weighted phase produced no usable value."""
    refs: dict[int, float] = {}
    for concurrency in weights:
        value = phase_value(metrics, concurrency)
        if not value or value <= 0:
            return None
        refs[concurrency] = value
    return refs


def violation(constraint: ConstraintSpec, value: float) -> float:
    """How far ``value`` is from satisfying ``constraint`` (≤ 0: satisfied)."""
    if constraint.op in ("<", "<="):
        excess = value - constraint.bound
        return excess if constraint.op == "<=" or excess != 0 else 1e-9
    shortfall = constraint.bound - value
    return shortfall if constraint.op == ">=" or shortfall != 0 else 1e-9


def constraint_values(constraints: tuple[ConstraintSpec, ...], metrics: PhaseMetrics) -> dict[str, float]:
    """One violation per constraint, worst phase first; a metric no phase reported counts as satisfied
    (e.g. a C=64 latency bound on a trial whose C=64 phase was skipped)."""
    out: dict[str, float] = {}
    for constraint in constraints:
        phases = [constraint.phase] if constraint.phase is not None else list(metrics)
        worst = 0.0
        for concurrency in phases:
            value = (metrics.get(concurrency) or {}).get(constraint.metric)
            if value is not None:
                worst = max(worst, violation(constraint, float(value)))
        out[constraint.text] = worst
    return out


def is_feasible(constraints: Mapping[str, float]) -> bool:
    return all(v <= 0 for v in constraints.values())
