"""``[objective]`` against the benchmark's phases: weights keyed by phase, constraints on reported
metrics.

The model (``ObjectiveSection``) checks types and signs; what needs the phases or the metric names
is here. Constraint metrics are the metrics a phase reports (``objectives.spec.METRICS``), so the
two cannot drift.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from objectives.spec import METRICS, BenchmarkSpec, ConstraintSpec
from tuner.core.fields import did_you_mean
from tuner.study.models import ObjectiveSection
from tuner.study.problems import Collect, Problems
from tuner.study.spec import ObjectiveSpec

CONSTRAINT_METRICS: tuple[str, ...] = METRICS
_CONSTRAINT_RE = re.compile(
    r"^\s*(?:c(\d+)\.)?([a-z0-9_]+)\s*(<=|>=|<|>)\s*([-+]?[0-9.]+(?:[eE][-+]?\d+)?)\s*$")
_WEIGHT_KEY_RE = re.compile(r"^c(\d+)$")


def objective(problems: Problems, section: ObjectiveSection,
              benchmark: BenchmarkSpec, *, phases_known: bool = True) -> ObjectiveSpec:
    """``[objective]`` against the benchmark's phases (``phases_known`` False: ``[benchmark]`` was
    refused, and a phase the objective names is not reported missing on top of that)."""
    concurrencies = sorted(p.concurrency for p in benchmark.phases)
    default_weights = {c: 1.0 / len(concurrencies) for c in concurrencies}
    weights: dict[int, float] = {}
    if section.weights is None:
        weights = default_weights
    else:
        for key, value in section.weights.items():
            where = f"objective.weights.{key}"
            m = _WEIGHT_KEY_RE.match(key)
            if not m:
                problems.add(where, "weights are keyed by phase, e.g. c1 = 0.5, c64 = 0.5")
                continue
            if int(m.group(1)) not in concurrencies:
                if phases_known:
                    problems.add(where, f"no benchmark phase with concurrency {m.group(1)} "
                                 f"(phases: {', '.join(f'c{c}' for c in concurrencies)})")
                continue
            weights[int(m.group(1))] = value
        if section.weights and weights and not any(weights.values()):
            problems.add("objective.weights", "all weights are zero; at least one must be positive")
    constraints: list[ConstraintSpec] = []
    for i, text in enumerate(section.constraints):
        constraint = _constraint(problems, f"objective.constraints[{i}]", text,
                                 concurrencies if phases_known else None)
        if constraint is not None:
            constraints.append(constraint)
    if section.mode == "pareto" and len([w for w in weights.values() if w > 0]) != 2:
        problems.add("objective.mode",
                     "pareto mode needs exactly two weighted phases (e.g. c1 and c64)")
    return ObjectiveSpec(weights=weights or default_weights, constraints=tuple(constraints),
                         mode=section.mode)


def _constraint(problems: Problems, where: str, text: str,
                concurrencies: list[int] | None) -> ConstraintSpec | None:
    """``concurrencies``: the phases a constraint may name (None: not known, not checked)."""
    m = _CONSTRAINT_RE.match(text)
    if not m:
        problems.add(where,
                     f"cannot read {text!r}; write METRIC OP NUMBER, e.g. 'ttft_p99_ms < 2000' or "
                     "'c64.error_rate <= 0.01'")
        return None
    phase, metric, op, bound = m.groups()
    if metric not in CONSTRAINT_METRICS:
        problems.add(where, f"unknown metric {metric!r}" + did_you_mean(metric, CONSTRAINT_METRICS))
        return None
    if phase is not None and concurrencies is not None and int(phase) not in concurrencies:
        problems.add(where, f"no benchmark phase with concurrency {phase}")
        return None
    try:
        value = float(bound)
    except ValueError:  # the pattern admits "1.2.3"
        problems.add(where, f"cannot read the number {bound!r}")
        return None
    if not math.isfinite(value):  # 1e999
        problems.add(where, f"the bound must be a finite number, not {bound}")
        return None
    return ConstraintSpec(text=text.strip(), metric=metric,
                          op=op,  # type: ignore[arg-type]
                          bound=value,
                          phase=int(phase) if phase is not None else None)


def parse_constraint(text: str, concurrencies: list[int]) -> ConstraintSpec:
    """One constraint written as in ``[objective] constraints`` (``spectune best --constraint``);
    ``ValueError`` naming the problem otherwise."""
    problems = Collect(Path("-"))
    constraint = _constraint(problems, "", text, concurrencies)
    if constraint is None:
        raise ValueError(problems.lines[0])
    return constraint
