"""The ``simulated`` target: a ``local`` target whose server is the built-in SGLang simulator.

The command is ``spectune simulate --profile P --time-scale X --seed N -- <flags> --host 127.0.0.1
--port P``, run with this interpreter's console script (or ``python -c "from tuner.cli import main;
main()"``), so the simulator is always the one of the installed spectune. Port 0 means "pick a free
port" — once per target, so every trial of a study talks to the same URL.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from objectives.spec import WorkloadSpec
from tuner.core.fields import HostList, did_you_mean, resolve_path
from tuner.core.net import free_port
from tuner.sglang.hardware import Hardware
from tuner.sglang.launch import ServerConfig
from tuner.sglang.options import OptionTable
from tuner.simulator.command import simulator_command
from tuner.simulator.config import InvalidServerArgs, profile_hardware, resolve
from tuner.simulator.ground_truth import expected_metrics
from tuner.simulator.profile import DEFAULT_PROFILE, load_profile, shipped_profiles
from tuner.simulator.startup import plan_startup
from tuner.targets.base import DeployPlan
from tuner.targets.local import LocalSettings, LocalTarget
from tuner.targets.readiness import ReadinessPolicy
from tuner.targets.settings import DEFAULT_STARTUP_TIMEOUT_S, Placement, TargetSettings, log_dir_of

#: The host name of a simulated target without a ``hosts`` list.
DEFAULT_SIMULATED_HOST = "simulated"


@dataclass(frozen=True)
class SimulatedSettings:
    log_dir: Path
    profile: str | None = None
    time_scale: float = 1.0
    seed: int = 0
    port: int = 0
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    study: str = "spectune"


class SimulatedTarget(LocalTarget):
    kind = "simulated"

    def __init__(self, settings: SimulatedSettings, table: OptionTable | None = None) -> None:
        self.sim_settings = settings
        self.time_scale = float(settings.time_scale)
        local = LocalSettings(
            command=simulator_command(settings.profile, settings.time_scale, settings.seed),
            log_dir=settings.log_dir, host="127.0.0.1",
            port=settings.port or free_port(), stop_grace_s=10.0,
            startup_timeout_s=settings.startup_timeout_s, help_timeout_s=60.0, study=settings.study,
        )
        super().__init__(local, table)
        # A real server's start-up takes minutes and a poll every 0.5 s finds it ready within a
        # fraction of a per cent of that; the simulator's is time-scaled (about 4 s at 25×), and
        # the same cap would add up to 0.5 s to every trial. Polled as often as the time scale
        # shrinks the start-up, down to the first poll's 50 ms (a poll costs a 503 or a refused
        # connection on 127.0.0.1).
        base = ReadinessPolicy()
        self.readiness = replace(base, max_interval_s=max(base.first_interval_s,
                                                          base.max_interval_s / self.time_scale))

    def plan(self, config: ServerConfig) -> DeployPlan:
        plan = super().plan(config)
        if self.sim_settings.port:
            return plan
        # The port is picked per target: tune picks its own, so the plan's number is an example.
        note = ("port = 0: tune picks a free port on 127.0.0.1 when it starts (here "
                f"{self.settings.port})")
        return replace(plan, steps=(*plan.steps, note))

    def check_access(self) -> tuple[str, ...]:
        found = super().check_access()
        if self.sim_settings.port:
            return found
        return tuple(line if not line.startswith("port ")
                     else "port = 0: a free port is picked at start"
                     for line in found)

    def expected_rate(self, config: ServerConfig, workload: WorkloadSpec,
                      concurrency: int) -> float | None:
        """The simulator's steady-state model (tuner/simulator/ground_truth.py) of this command
        line: tokens per real second at this target's time scale; None for a command line the
        simulator would refuse."""
        profile = load_profile(self.sim_settings.profile or DEFAULT_PROFILE)
        try:
            expected = expected_metrics(profile, self.launch(config).args, workload, concurrency)
        except InvalidServerArgs:
            return None
        # one request at a time: its tokens over its whole life, first token included
        rate = expected.per_request_e2e_tok_s if concurrency == 1 else expected.aggregate_tok_s
        return rate * self.time_scale

    def expected_startup_s(self, config: ServerConfig) -> float:
        """The simulator's own startup model for this command line (weights, KV cache, graph
        captures)."""
        profile = load_profile(self.sim_settings.profile or DEFAULT_PROFILE)
        steps = plan_startup(profile,
                             resolve(profile, self.launch(config).args, exit_on_error=False)).steps
        return sum(step.delay_s for step in steps) / self.time_scale


class SimulatedTargetSettings(TargetSettings):
    """``kind = "simulated"``: the built-in SGLang simulator on 127.0.0.1 (no GPU needed)."""

    kind: Literal["simulated"] = Field(
        description="The built-in SGLang simulator, on this machine.")
    profile: str | None = Field(None, description=(
        "A shipped simulator profile name, or the path of a profile TOML file relative to the "
        "study file (default: the seed campaign's Qwen3.5-122B + EAGLE-3 server)."))
    time_scale: float = Field(SimulatedSettings.time_scale, gt=0, description=(
        "How many times faster than the modelled server the simulator runs."))
    seed: int = Field(SimulatedSettings.seed, ge=0, lt=2**32,
                      description="The simulator's noise seed.")
    port: int = Field(SimulatedSettings.port, ge=0, le=65535,
                      description="The simulator's TCP port on 127.0.0.1; 0 picks a free one.")
    log_dir: str | None = Field(None,
                                description="Where server logs go, relative to the study file "
                                            "(default: .spectune/<study>/logs beside it).")
    hosts: HostList = Field((), description=(
        "Labels of simulated hosts used at once, one worker and one simulator each "
        "(docs/scaling.md)."))

    launch_is_exact = False  # the simulator stands in for `python3 -m sglang.launch_server`

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        if "/" in value or value.endswith(".toml"):
            resolved = resolve_path(value, info)
            if not resolved.is_file():
                raise ValueError(f"file not found: {resolved}")
            return str(resolved)
        shipped = shipped_profiles()
        if value not in shipped:
            raise ValueError(f"unknown simulator profile {value!r}" + did_you_mean(value, shipped))
        return value

    @classmethod
    def starter(cls, model: str | None) -> dict[str, Any]:
        # The shipped profile of that model, if there is one; the simulator models its profile's
        # server.
        models = {load_profile(name).model.path: name for name in sorted(shipped_profiles())}
        if model is not None and model not in models:
            # The simulator models its profile's server: a file naming another model would mislead.
            raise ValueError(
                f"the simulator has no profile of {model} (profiles model: {', '.join(models)})")
        profile = models.get(model or "", DEFAULT_PROFILE)
        # 10x: a trial in seconds, and still within a few per cent of the model on a small machine
        # (docs/simulator.md, "Time scale and host load").
        return {"profile": profile, "time_scale": 10.0, "port": SimulatedSettings.port}

    @classmethod
    def starter_flags(cls, model: str | None) -> dict[str, Any]:
        profile = load_profile(str(cls.starter(model)["profile"]))
        # The profile's GPU count: at TP 1 its model may not fit one GPU (an OOM, as for real).
        return {"model-path": profile.model.path,
                "speculative-draft-model-path": profile.model.draft_path,
                "tp-size": profile.hardware.num_gpus}

    @classmethod
    def starter_examples(cls) -> dict[str, Any]:
        return {**super().starter_examples(), "log_dir": "logs", "hosts": ["sim-1", "sim-2"]}

    def listed_hosts(self) -> tuple[str, ...]:
        return self.hosts

    def covered_hosts(self, study: str) -> tuple[str, ...]:
        return self.hosts or (DEFAULT_SIMULATED_HOST,)

    def for_host(self, host: str, study: str) -> SimulatedTargetSettings:
        if not self.hosts:
            return self
        # Per-host logs and pid file: a worker cleaning up a dead worker's leftover server must find
        # that host's server, never another host's.
        base = Path(self.log_dir or Path(".spectune") / study / "logs")
        return self.model_copy(update={"log_dir": str(base / host), "hosts": (host,)})

    def check(self) -> Iterator[tuple[str, str]]:
        if len(self.hosts) > 1 and self.port:
            yield "port", ("must be 0 with several hosts (each simulated host picks its own free "
                           "port)")

    def hardware(self) -> Hardware:
        """The profile's model and GPU (``gpu`` / ``compute_capability`` still win over the
        profile's GPU)."""
        profile = profile_hardware(load_profile(self.profile or DEFAULT_PROFILE))
        given = super().hardware().compute_capability
        return Hardware(profile.model_architecture, given or profile.compute_capability)

    def make_target(self, placement: Placement, table: OptionTable) -> SimulatedTarget:
        return SimulatedTarget(SimulatedSettings(
            log_dir=log_dir_of(placement, self.log_dir), profile=self.profile,
            time_scale=self.time_scale,
            seed=self.seed, port=self.port, startup_timeout_s=self.startup_timeout,
            study=placement.study), table)


def simulator_profile(settings: TargetSettings) -> str | None:
    """The simulator profile a study's target names (None: another kind, or the default profile)."""
    return settings.profile if isinstance(settings, SimulatedTargetSettings) else None
