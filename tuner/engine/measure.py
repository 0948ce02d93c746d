"""The study's ``Measurer``: a real deployment target plus the aiohttp benchmark, one phase at a time."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from objectives.phase import ProgressCallback
from objectives.runner import run_phase
from objectives.spec import BenchmarkSpec
from tuner.core import interrupts
from tuner.sglang.launch import ServerConfig
from tuner.targets.base import Deployment, Target, TargetUnavailable

#: Waits between attempts when the target cannot be reached at all (host down, SSH refused).
UNREACHABLE_BACKOFF_S = (5.0, 20.0, 60.0)


class TargetMeasurer:
    def __init__(self, target: Target, benchmark: BenchmarkSpec, progress: ProgressCallback | None = None,
                 *, sleep: Callable[[float], None] = time.sleep,
                 backoff: tuple[float, ...] = UNREACHABLE_BACKOFF_S) -> None:
        self.target = target
        self.benchmark = benchmark
        self.progress = progress
        self.sleep = sleep
        self.backoff = backoff
        self.deployment: Deployment | None = None

    def deploy(self, config: ServerConfig) -> Mapping[str, Any]:
        """Deploy, retrying only when the target is unreachable; ``DeployFailed`` passes straight through."""
        for delay in (*self.backoff, None):
            try:
                self.deployment = self.target.deploy(config)
                break
            except TargetUnavailable:
                if delay is None:
                    raise
                self.sleep(delay)
        assert self.deployment is not None
        interrupts.check()
        d = self.deployment
        facts: dict[str, Any] = {"launch": d.launch.shell(), "base_url": d.base_url, "log": d.log_location,
                                 "timings": {"deploy_s": d.deploy_s, "ready_s": d.ready_s}}
        if d.effective is not None:  # the target's own SGLang resolved it: recorded instead of spectune's rules
            facts["effective"] = d.effective
        return facts

    def measure(self, phase_index: int) -> Mapping[str, Any]:
        assert self.deployment is not None, "measure() before deploy()"
        interrupts.check()
        result = run_phase(self.deployment.base_url, self.benchmark, phase_index, self.progress)
        interrupts.check()  # an interrupt the event loop swallowed ends the trial here, not after the study
        return result.at_time_scale(self.target.time_scale).to_dict()
