"""The parts of a deploy plan (``spectune validate --plan``) every target kind words the same way.

Each kind renders its own plan (``Target.plan``) from the same code that deploys — ``launch()`` and,
for systemd, the drop-in renderer — so the plan is the exact text a deploy would write or run, not a
description of it.
"""

from __future__ import annotations

from tuner.core.durations import format_duration
from tuner.targets.readiness import READY_PATHS


def readiness_text(base_url: str, timeout_s: float, watch: str) -> str:
    """How readiness is decided: the health paths polled, the time allowed, and what the kind
    watches."""
    paths = " (else ".join(READY_PATHS) + ")" * (len(READY_PATHS) - 1)
    return (f"GET {base_url}{paths} until it answers 200, at most {format_duration(timeout_s)} "
            f"(startup_timeout); {watch}")
