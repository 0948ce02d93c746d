"""A trial's phases in their stored form: by concurrency as a string (JSON object keys), and the
skip bound."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from objectives.scoring import PhaseMetrics


def skip_bounds(skip: Mapping[str, Any] | None) -> dict[int, float]:
    """A stored ``Key.SKIP`` → the bound assumed for each skipped phase, by concurrency."""
    return {int(c): float(v) for c, v in ((skip or {}).get("bounds") or {}).items()}


def decode_phases(stored: Mapping[str, Any] | None) -> dict[int, dict[str, object]]:
    """``{"1": {...}, "64": {...}}`` as stored → metrics by concurrency."""
    return {int(c): dict(m) for c, m in (stored or {}).items()}


def encode_phases(metrics: PhaseMetrics) -> dict[str, Mapping[str, object]]:
    """Metrics by concurrency → the stored form (JSON object keys are strings)."""
    return {str(c): m for c, m in metrics.items()}
