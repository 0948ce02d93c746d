"""What a trial measures with: ``Measurer`` deploys a configuration and measures its phases
(tuner/run/trial.py runs a trial through it).

How a configuration is measured is behind ``Measurer``: the study uses a real target and the aiohttp
benchmark; bench/sample_efficiency.py uses the simulator's noiseless ground truth with the same
logic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from tuner.run.measurement import DeployFacts, PhaseMeasurement
from tuner.sglang.launch import ServerConfig


class Measurer(Protocol):
    """Deploys a configuration and measures one benchmark phase at a time. A measurer may also
    ``resolve`` a configuration without deploying it (``Resolving``): the target's own SGLang then
    decides its identity.

    The study's measurer answers typed (tuner/run/measure.py); a landscape's may answer in the plain
    form the landscape API documents (tuner/run/measurement.py reads it once, here)."""

    def deploy(self, config: ServerConfig) -> DeployFacts | Mapping[str, Any]:
        """Start ``config`` and return the facts of the start. Raises ``DeployFailed``."""

    def measure(self, phase_index: int) -> PhaseMeasurement | Mapping[str, Any]:
        """Run phase ``phase_index`` of the study's benchmark on the deployed server."""


@runtime_checkable
class Resolving(Protocol):
    def resolve(self, config: ServerConfig) -> Mapping[str, Any] | None:
        """The effective values the target's SGLang runs for ``config`` (None: it cannot be asked);
        raises ``DeployFailed`` when it refuses the command line."""
