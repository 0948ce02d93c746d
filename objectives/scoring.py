"""Turning phase metrics into one score (or two objectives) and constraint violations.

Formula (docs/scoring.md): each weighted phase contributes its *primary metric* — per-request decode
tok/s at C=1 (what one user feels), aggregate output tok/s at C>1 (what the box delivers) — divided
by the same metric of a reference run, the study's baseline. With weights normalised to sum to 1:

    score = Σ_c  w_c · m_c / ref_c

so the baseline scores 1.0, 1.12 means "12 % better under these weights", and neither tok/s scale
decides the ranking by its size. Re-ranking with other weights needs only the stored metrics.

Every figure carries a 95 % interval (objectives/confidence.py); the score's is the delta method
over the phases' intervals — each phase's interval *paired* with the reference run's same requests
where both kept their per-request parts (objectives/paired.py: the same prompts in the same order
make their spread common to both), else the figure's own — the score is linear in the phase metrics
and the phases are measured independently, so its half-width is ``√Σ_c (w_c · h_c / ref_c)²``. The
references are constants of the study (every score of it divides by the same ones), so their own
noise shifts all scores alike and does not enter.

Constraints follow Optuna's convention: a value ≤ 0 is satisfied, > 0 is the amount of violation.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from objectives.confidence import Interval, pool, sample_from_dict
from objectives.latency_intervals import LATENCY_INTERVALS
from objectives.paired import PAIRED_SUFFIX, PerRequest, paired_interval
from objectives.paired import pooled as paired_pool
from objectives.spec import ConstraintSpec

#: Constraint keys every trial sets (Optuna's GPSampler needs the same keys on every trial).
VALID_KEY = "valid configuration"
STARTED_KEY = "server started"

#: One phase's figures by metric name — numbers, intervals as [low, high], the samples and
#: per-request parts that pooling and pairing read — as stored, and as scoring, constraints and
#: reports read them; each value is checked where it is read (``figure``).
PhaseFigures = Mapping[str, object]
#: A run's phases by concurrency.
PhaseMetrics = Mapping[int, PhaseFigures]


def figure(phase: PhaseFigures | None, name: str) -> float | None:
    """The phase's figure ``name`` as a number; None where the phase lacks it or it is not one."""
    value = (phase or {}).get(name)
    return float(value) if isinstance(value, int | float) else None


def _part(phase: PhaseFigures, name: str) -> Mapping[str, object]:
    """A part of the phase that is itself a mapping (``samples``); empty where there is none."""
    value = phase.get(name)
    return value if isinstance(value, Mapping) else {}


def primary_metric(concurrency: int) -> str:
    return "per_request_tok_s_mean" if concurrency == 1 else "aggregate_tok_s"


@dataclass(frozen=True)
class Assessment:
    """A trial's score (None: a weighted phase has no value) and its 95 % interval (None: a phase
    has none)."""

    score: float | None
    interval: Interval | None


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

    def assess(self, metrics: PhaseMetrics) -> Assessment:
        """The score and its interval, the score computed once (what every reader of a trial's
        figures uses)."""
        score = self.score(metrics)
        return Assessment(score, self._interval_at(metrics, score))

    def interval(self, metrics: PhaseMetrics) -> Interval | None:
        """The score's 95 % interval, or None when a weighted phase has no value or no interval."""
        return self.assess(metrics).interval

    def _interval_at(self, metrics: PhaseMetrics, score: float | None) -> Interval | None:
        if score is None:
            return None
        variance = 0.0
        for concurrency, weight in self.normalized_weights.items():
            interval = score_phase_interval(metrics, concurrency)
            if interval is None:
                return None
            variance += (weight * (interval.high - interval.low) / 2
                         / self.reference(concurrency)) ** 2
        half = math.sqrt(variance)
        return Interval(score - half, score + half)

    def reference(self, concurrency: int) -> float:
        ref = self.references.get(concurrency)
        return ref if ref else 1.0


def phase_value(metrics: PhaseMetrics, concurrency: int) -> float | None:
    return figure(metrics.get(concurrency), primary_metric(concurrency))


def phase_interval(metrics: PhaseMetrics, concurrency: int) -> Interval | None:
    """The 95 % interval of a phase's primary metric (None: not measured, or stored before intervals
    existed)."""
    phase = metrics.get(concurrency)
    return Interval.from_stored(phase.get(primary_metric(concurrency)
                                          + "_ci")) if phase is not None else None


def score_phase_interval(metrics: PhaseMetrics, concurrency: int) -> Interval | None:
    """The interval a score uses for a phase: paired with the reference run's same requests when the
    phase has it (``<metric>_paired_ci``, objectives/paired.py), else the figure's own interval."""
    phase = metrics.get(concurrency)
    if phase is None:
        return None
    paired = Interval.from_stored(phase.get(primary_metric(concurrency) + PAIRED_SUFFIX))
    return paired if paired is not None else phase_interval(metrics, concurrency)


def with_paired(metrics: PhaseMetrics,
                reference: PhaseMetrics | None) -> dict[int, dict[str, object]]:
    """``metrics`` with each phase's primary metric's interval relative to ``reference`` (the
    reference run's phases) stored as ``<metric>_paired_ci`` where both kept their per-request
    parts."""
    out = {c: dict(phase) for c, phase in metrics.items()}
    for concurrency, phase in out.items():
        ref = (reference or {}).get(concurrency)
        if ref is None:
            continue
        name = primary_metric(concurrency)
        interval = paired_interval(figure(phase, name),
                                   PerRequest.from_dict(phase.get("per_request")),
                                   PerRequest.from_dict(ref.get("per_request")))
        if interval is not None:
            phase[name + PAIRED_SUFFIX] = interval
    return out


#: The figures whose samples pool across repeated phases.
POOLED = ("per_request_tok_s_mean", "aggregate_tok_s")


def pooled_phase(runs: Sequence[PhaseFigures]) -> dict[str, object]:
    """One phase measured several times (fresh restarts of one configuration) → one phase's metrics.

    The throughput figures and their intervals come from the runs' samples pooled (every request of
    every run, objectives/confidence.py); other numeric metrics are the mean over the runs. ``runs``
    says how many runs it rests on."""
    out: dict[str, object] = {}
    numeric = {k for run in runs for k, v in run.items() if isinstance(v, int | float)
               and not isinstance(v, bool)}
    for key in sorted(numeric):
        values = [v for v in (figure(run, key) for run in runs) if v is not None]
        out[key] = statistics.fmean(values) if values else None
    out["runs"] = len(runs)
    samples: dict[str, object] = {}
    for name in POOLED:
        sample = pool(s for s in (sample_from_dict(_part(run, "samples").get(name))
                                  for run in runs)
                      if s is not None)
        if sample is None or len([r for r in runs if _part(r, "samples").get(name)]) != len(
            runs):
            # a run without the sample (a study from before intervals): keep the plain mean
            continue
        interval = sample.interval()
        out[name] = sample.estimate
        out[name + "_ci"] = interval.to_list() if interval else None
        samples[name] = sample.to_dict()
    out["samples"] = samples
    for name in LATENCY_INTERVALS:
        out[name + "_ci"] = _pooled_latency_interval(runs, name)
    parts = [PerRequest.from_dict(run.get("per_request")) for run in runs]
    if parts and all(p is not None for p in parts):
        together = paired_pool(p for p in parts if p is not None)
        out["per_request"] = together.to_dict() if together is not None else None
    return out


def _pooled_latency_interval(runs: Sequence[PhaseFigures],
                             name: str) -> list[float] | None:
    """The interval of the runs' mean of a latency figure, from each run's own interval (a bootstrap
    over its requests): the mean ± the root of the runs' squared distances to their bounds ÷ the
    number of runs (independent runs' errors add in quadrature), each side apart — a percentile's
    interval is not symmetric. None unless every run has one."""
    values: list[float] = []
    below: list[float] = []
    above: list[float] = []
    for run in runs:
        value, interval = run.get(name), run.get(name + "_ci")
        if not isinstance(value, int | float) or not isinstance(interval, list | tuple) \
                or len(interval) != 2:
            return None
        values.append(float(value))
        below.append(float(value) - float(interval[0]))
        above.append(float(interval[1]) - float(value))
    if not values:
        return None
    mean, k = statistics.fmean(values), len(values)
    return [mean - math.hypot(*below) / k, mean + math.hypot(*above) / k]


@dataclass(frozen=True)
class Judged:
    """A benchmarked run judged once: its phases with the paired intervals added, its score and
    interval, and one violation per constraint (Optuna's convention: > 0 violates)."""

    metrics: dict[int, dict[str, object]]
    assessment: Assessment
    constraints: dict[str, float]
    #: Each weighted phase's own figure (its primary metric; None: not measured), what a Pareto
    #: study's objectives are.
    phase_values: dict[int, float | None]

    @property
    def score(self) -> float:
        assert self.assessment.score is not None  # judge always values a benchmarked run
        return self.assessment.score


def judge(metrics: PhaseMetrics, scorer: Scorer, reference_run: PhaseMetrics | None,
          constraints: tuple[ConstraintSpec, ...], skip_bounds: Mapping[int, float]) -> Judged:
    """Everything a benchmarked run's end needs from its figures, computed here and nowhere else:
    each phase's interval paired with the reference run's same requests (common random numbers),
    the score and its interval, and the constraints. Only a run whose weighted phase was skipped
    lacks a score: it is valued at its (losing) optimistic bound, and at 0.0 without one — with no
    interval, since a bound is not a measurement."""
    paired = with_paired(metrics, reference_run)
    assessed = scorer.assess(paired)
    if assessed.score is None:
        assessed = Assessment(scorer.optimistic_score(paired, skip_bounds) if skip_bounds
                              else 0.0, None)
    return Judged(paired, assessed, constraint_values(constraints, metrics),
                  {c: phase_value(paired, c) for c in scorer.normalized_weights})


def references_from(metrics: PhaseMetrics, weights: Mapping[int, float]) -> dict[int, float] | None:
    """Reference values from one measured run, or None if a weighted phase produced no usable
    value."""
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


def constraint_values(constraints: tuple[ConstraintSpec, ...],
                      metrics: PhaseMetrics) -> dict[str, float]:
    """One violation per constraint, worst phase first; a metric no phase reported counts as
    satisfied (e.g. a C=64 latency bound on a trial whose C=64 phase was skipped)."""
    out: dict[str, float] = {}
    for constraint in constraints:
        phases = [constraint.phase] if constraint.phase is not None else list(metrics)
        worst = 0.0
        for concurrency in phases:
            value = figure(metrics.get(concurrency), constraint.metric)
            if value is not None:
                worst = max(worst, violation(constraint, value))
        out[constraint.text] = worst
    return out


def is_feasible(constraints: Mapping[str, float]) -> bool:
    return all(v <= 0 for v in constraints.values())
