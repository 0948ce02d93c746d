"""The ``simulated`` target: a ``local`` target whose server is the built-in SGLang simulator.

The command is ``spectune simulate --profile P --time-scale X --seed N -- <flags> --host 127.0.0.1 --port P``,
run with this interpreter's console script (or ``python -c "from tuner.cli import main; main()"``), so the
simulator is always the one of the installed spectune. Port 0 means "pick a free port" — once per target, so
every trial of a study talks to the same URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tuner.core.net import free_port
from tuner.sglang.options import OptionTable
from tuner.simulator.command import simulator_command
from tuner.targets.local import LocalSettings, LocalTarget


@dataclass(frozen=True)
class SimulatedSettings:
    log_dir: Path
    profile: str | None = None
    time_scale: float = 1.0
    seed: int = 0
    port: int = 0
    startup_timeout_s: float = 900.0
    study: str = "spectune"


class SimulatedTarget(LocalTarget):
    kind = "simulated"

    def __init__(self, settings: SimulatedSettings, table: OptionTable | None = None) -> None:
        self.sim_settings = settings
        self.time_scale = float(settings.time_scale)
        local = LocalSettings(
            command=simulator_command(settings.profile, settings.time_scale, settings.seed),
            log_dir=settings.log_dir, host="127.0.0.1",
            port=settings.port or free_port(), stop_grace_s=10.0, startup_timeout_s=settings.startup_timeout_s,
            help_timeout_s=60.0, study=settings.study,
        )
        super().__init__(local, table)
