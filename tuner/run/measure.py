"""The study's ``Measurer``: a real deployment target plus the aiohttp benchmark, one phase at a
time."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from objectives.probe import ProbeOutput, probe_outputs
from objectives.progress import PhaseProgress, ProgressCallback
from objectives.runner import run_phase
from objectives.scoring import PhaseFigures
from objectives.spec import BenchmarkSpec
from tuner.core import interrupts
from tuner.core.faults import fault_point
from tuner.run import runcheck
from tuner.run.measurement import DeployFacts, PhaseFailure, PhaseMeasurement
from tuner.sglang.launch import ServerConfig
from tuner.targets.base import DeployFailed, Deployment, Target, TargetUnavailable

#: Waits between attempts when the target cannot be reached at all (host down, SSH refused).
UNREACHABLE_BACKOFF_S = (5.0, 20.0, 60.0)


def _retryable(exc: TargetUnavailable) -> bool:
    """Whether waiting can help. A port another program holds will not free itself in a minute, and
    retrying cost 85 s of silence before the message (a target marks such errors ``retryable =
    False``)."""
    return bool(getattr(exc, "retryable", True))


class TargetMeasurer:
    def __init__(self,
                 target: Target, benchmark: BenchmarkSpec, progress: ProgressCallback | None = None,
                 *, sleep: Callable[[float], None] = time.sleep,
                 backoff: tuple[float, ...] = UNREACHABLE_BACKOFF_S,
                 say: Callable[[str], None] | None = None) -> None:
        self.target = target
        self.benchmark = benchmark
        self.progress = progress
        self.sleep = sleep
        self.backoff = backoff
        self.deployment: Deployment | None = None
        self.say = say or (lambda _line: None)

    def deploy(self, config: ServerConfig) -> DeployFacts:
        """Deploy, retrying only when the target is unreachable; ``DeployFailed`` passes straight
        through with the failed server's log location added (``spectune trial N`` shows it)."""
        attempts = len(self.backoff) + 1
        for attempt, delay in enumerate((*self.backoff, None), start=1):
            try:
                self.deployment = self.target.deploy(config)
                break
            except TargetUnavailable as exc:
                if delay is None or not _retryable(exc):
                    raise
                # Say what is being waited for: an unreachable host otherwise looks like a hung
                # tuner.
                self.say(f"target unreachable: {exc}; trying again in {delay:g} s (attempt "
                         f"{attempt + 1} of {attempts})")
                self.sleep(delay)
            except DeployFailed as exc:
                exc.log = self.log_location()
                raise
        assert self.deployment is not None
        interrupts.check()
        d = self.deployment
        # effective: the target's own SGLang resolved it (recorded instead of spectune's rules), or
        # None
        return DeployFacts(launch=d.launch.shell(), base_url=d.base_url, log=d.log_location,
                           effective=d.effective,
                           timings={"deploy_s": d.deploy_s, "ready_s": d.ready_s})

    def resolve(self, config: ServerConfig) -> Mapping[str, Any] | None:
        """The target's own SGLang on ``config`` (cached there), before any deployment; see
        ``Target.resolve``."""
        return self.target.resolve(config)

    def log_location(self) -> str | None:
        """Where the server started last writes its log (local and simulated targets keep one file
        per start)."""
        return self.target.log_location or None

    def measure(self, phase_index: int) -> PhaseMeasurement:
        assert self.deployment is not None, "measure() before deploy()"
        interrupts.check()
        concurrency = self.benchmark.phases[phase_index].concurrency
        point = f"phase_c{concurrency}"

        def progress(update: PhaseProgress) -> None:
            if update.stage == "measure":
                fault_point(point)  # inside the phase's event loop, its requests in flight
            if self.progress is not None:
                self.progress(update)

        result = run_phase(self.deployment.base_url, self.benchmark, phase_index, progress)
        # an interrupt the event loop swallowed ends the trial here, not after the study
        interrupts.check()
        scaled = result.at_time_scale(self.target.time_scale)
        figures = scaled.to_dict()
        # the phase failed as a whole (objectives/overload.py): the host, not the config
        if scaled.failure:
            return PhaseMeasurement(concurrency, figures,
                                    PhaseFailure(scaled.failure,
                                                 scaled.failure_message or scaled.failure))
        if runcheck.needs_check(figures):
            failure = self._run_failure(figures, concurrency)
            if failure is not None:
                figures.update(failure=failure.failure_class, failure_message=failure.message)
                return PhaseMeasurement(concurrency, figures, PhaseFailure(
                    failure.failure_class, failure.message, failure.cause, failure.evidence,
                    self.target.log_tail(80)))
        return PhaseMeasurement(concurrency, figures)

    def outputs(self, count: int, max_tokens: int, *, concurrent: bool = True) -> tuple[ProbeOutput,
                                                                                        ...]:
        """The output check's greedy probe on the deployed server (objectives/probe.py)."""
        assert self.deployment is not None, "outputs() before deploy()"
        interrupts.check()
        return probe_outputs(self.deployment.base_url, self.benchmark.workload, count, max_tokens,
                             concurrent=concurrent)

    def _run_failure(self, metrics: PhaseFigures,
                     concurrency: int) -> runcheck.RunFailure | None:
        """A crash, hang or burst of server errors in this phase (tuner/run/runcheck.py), or
        None."""
        assert self.deployment is not None
        state = runcheck.server_state(self.deployment.base_url, self._exit_info,
                                      runcheck.health_timeout(self.target.time_scale))
        interrupts.check()
        return runcheck.judge(metrics, concurrency, state, self.target.log_tail(80))

    def _exit_info(self) -> Any:
        try:
            return self.target.exit_info()
        except TargetUnavailable:  # the host cannot be asked: the health check still can
            return None
