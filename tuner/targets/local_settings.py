"""``kind = "local"`` in a study file: its fields, starter, and the target it makes
(tuner/targets/local.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tuner.core.fields import Command, HostName, Port, PositiveDuration
from tuner.sglang.options import OptionTable
from tuner.targets.local import LocalSettings, LocalTarget
from tuner.targets.settings import Placement, TargetSettings, log_dir_of


class LocalTargetSettings(TargetSettings):
    """``kind = "local"``: the server as a child process group of spectune, on this machine."""

    kind: Literal["local"] = Field(
        description="The server runs as a child process on this machine.")
    command: Command = Field(
        description="The server command the flags are appended to, as an argv list "
                    "(e.g. [\"python3\", \"-m\", \"sglang.launch_server\"]).")
    host: HostName = Field(LocalSettings.host,
                           description="The address the server binds (its --host).")
    port: Port = Field(LocalSettings.port, description="The server's TCP port (its --port).")
    log_dir: str | None = Field(None,
                                description="Where server logs go, relative to the study file "
                                            "(default: .spectune/<study>/logs beside it).")
    stop_grace: PositiveDuration = Field(LocalSettings.stop_grace_s, description=(
        "How long a stopping server may take after SIGTERM before its process group is killed."))

    def launch_prefix(self) -> tuple[str, ...]:
        return self.command

    @classmethod
    def starter(cls, model: str | None) -> dict[str, Any]:
        return {"command": ["python3", "-m", "sglang.launch_server"], "port": LocalSettings.port}

    @classmethod
    def starter_examples(cls) -> dict[str, Any]:
        return {**super().starter_examples(), "log_dir": "logs"}

    def make_target(self, placement: Placement, table: OptionTable) -> LocalTarget:
        return LocalTarget(LocalSettings(
            command=self.command, log_dir=log_dir_of(placement, self.log_dir), host=self.host,
            port=self.port, stop_grace_s=self.stop_grace, startup_timeout_s=self.startup_timeout,
            study=placement.study, resolver_fallback=self.when_sglang_cannot_judge == "rules",
            resolver_gpu=self.resolver_gpu()), table)
