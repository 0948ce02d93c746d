"""The SGLang simulator: an SGLang 0.5.23 server with speculative decoding, without a GPU.

``spectune simulate`` runs it as its own process (``run.py``); ``process.running_simulator`` starts
one for tests; ``ground_truth.expected_metrics`` gives the noiseless metrics the live server
converges to. Layers: profile (data) → config (command line → resolved settings) → model (timings,
acceptance) → engine (continuous batching in asyncio) → server (HTTP routes); startup (log
milestones, failure modes).
"""

from __future__ import annotations

from tuner.simulator.config import InvalidServerArgs, ServerConfig, resolve
from tuner.simulator.ground_truth import SEED_WORKLOAD, ExpectedMetrics, expected_metrics
from tuner.simulator.profile import (
    DEFAULT_PROFILE,
    Profile,
    ProfileError,
    load_profile,
    shipped_profiles,
)

__all__ = [
    "DEFAULT_PROFILE",
    "SEED_WORKLOAD",
    "ExpectedMetrics",
    "InvalidServerArgs",
    "Profile",
    "ProfileError",
    "ServerConfig",
    "expected_metrics",
    "load_profile",
    "resolve",
    "shipped_profiles",
]
