"""``--weights c1=0.7,c64=0.3`` and ``--constraint 'ttft_p99_ms<2000'`` as validated values."""

from __future__ import annotations

import math
import re

from tuner.core.errors import UsageError
from tuner.study.objective import parse_constraint
from tuner.study.spec import ConstraintSpec

_WEIGHT = re.compile(r"^\s*c(\d+)\s*=\s*(\S+)\s*$")


def parse_weights(text: str, concurrencies: list[int]) -> dict[int, float]:
    """Weights keyed by phase concurrency; every key must name a phase of the study's benchmark."""
    phases = ", ".join(f"c{c}" for c in concurrencies)
    weights: dict[int, float] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        m = _WEIGHT.match(item)
        if not m:
            raise UsageError(
                f"--weights: cannot read {item.strip()!r}; write c1=0.7,c64=0.3 (phases: {phases})")
        concurrency = int(m.group(1))
        if concurrency not in concurrencies:
            raise UsageError(
                f"--weights: unknown weight key 'c{concurrency}'; this study's phases are {phases}")
        try:
            value = float(m.group(2))
        except ValueError:
            raise UsageError(f"--weights: c{concurrency}={m.group(2)!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"--weights: c{concurrency} must be a number ≥ 0, not {m.group(2)}")
        if concurrency in weights:
            raise UsageError(f"--weights: c{concurrency} given twice")
        weights[concurrency] = value
    if not weights:
        raise UsageError(f"--weights: no weights given; write c1=0.7,c64=0.3 (phases: {phases})")
    if not any(weights.values()):
        raise UsageError("--weights: all weights are zero; at least one must be positive")
    return weights


def parse_constraints(texts: tuple[str, ...] | list[str],
                      concurrencies: list[int]) -> tuple[ConstraintSpec, ...]:
    out = []
    for text in texts:
        try:
            out.append(parse_constraint(text, concurrencies))
        except ValueError as exc:
            raise UsageError(f"--constraint: {exc}") from None
    return tuple(out)
