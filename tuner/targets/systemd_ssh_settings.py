"""``kind = "systemd-ssh"`` in a study file: its fields, checks and starter, and the target it makes
(tuner/targets/systemd_ssh.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from tuner.core.fields import Command, HostList, HostName, Port, PositiveDuration, resolve_path
from tuner.sglang.options import OptionTable
from tuner.targets.settings import Placement, TargetSettings
from tuner.targets.ssh import SSHSettings
from tuner.targets.systemd_ssh import SystemdSettings, SystemdSshTarget

_UNIT_RE = re.compile(r"[A-Za-z0-9@_.\-:]+\.service")


class SystemdSshTargetSettings(TargetSettings):
    """``kind = "systemd-ssh"``: a systemd unit on a GPU host, reconfigured over SSH with a drop-in."""  # noqa: E501 - verbatim in the JSON Schema

    kind: Literal["systemd-ssh"] = Field(
        description="A systemd unit on a remote host, redeployed over SSH.")
    hosts: HostList = Field((), description=(
        "Identical GPU hosts one study uses at once, one worker each (docs/scaling.md); instead of "
        "host."))
    host: HostName | None = Field(None,
                                  description="The SSH host (required unless hosts is given).")
    ssh_port: Port = Field(SSHSettings.port, description="The SSH server's port.")
    user: str = Field(SSHSettings.user, min_length=1, description="The SSH user.")
    key_file: str | None = Field(None, description=(
        "The SSH private key, relative to the study file (default: your SSH agent and ~/.ssh "
        "keys)."))
    known_hosts: str | None = Field(None, description=(
        "The known_hosts file with the host's key, relative to the study file (default: "
        "~/.ssh/known_hosts)."))
    accept_unknown_host_key: bool = Field(SSHSettings.accept_unknown_host_key, description=(
        "Trust a host key that is not in known_hosts (only on networks you trust)."))
    unit: str = Field(json_schema_extra={"pattern": _UNIT_RE.pattern},
                      description="The systemd service that runs the server (e.g. sglang.service).")
    command: Command = Field(
        description="The server command on the host the flags are appended to, as an argv "
                    "list (e.g. [\"/opt/sglang/.venv/bin/python\", \"-m\", "
                    "\"sglang.launch_server\"]).")
    server_port: Port = Field(SystemdSettings.server_port,
                              description="The server's TCP port (its --port).")
    server_host: HostName | None = Field(None, description=(
        "Where the tuner connects to the server (default: the SSH host)."))
    listen_host: HostName = Field(SystemdSettings.listen_host,
                                  description="The address the server binds "
                                              "(its --host).")
    systemd_dir: str = Field(SystemdSettings.systemd_dir, description=(
        "Where the unit's drop-in directory lives on the host (an absolute path)."))
    sudo: bool = Field(SSHSettings.sudo, description="Run systemctl and file writes through sudo.")
    connect_timeout: PositiveDuration = Field(SSHSettings.connect_timeout_s,
                                              description="How long one SSH connection attempt may "
                                                          "take.")
    python: str | None = Field(None, min_length=1, description=(
        "The Python on the host whose SGLang judges each configuration before it is deployed "
        "(docs/targets.md); default: the interpreter of command."))

    unit_flags: Literal["refuse", "carry"] = Field("refuse", description=(
        "Options the unit's own command has and the study never sets (an API key, a served model "
        "name, a context length, a chat template), which the drop-in would drop since it replaces "
        "ExecStart: \"refuse\" stops at preflight naming them; \"carry\" keeps them in every "
        "deploy (docs/targets.md)."))

    outlives_spectune = True

    @field_validator("key_file", "known_hosts")
    @classmethod
    def _existing_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        resolved = resolve_path(value, info)
        if not resolved.is_file():
            raise ValueError(f"file not found: {resolved}")
        return str(resolved)

    @field_validator("unit")
    @classmethod
    def _service_name(cls, value: str) -> str:
        if not _UNIT_RE.fullmatch(value):
            raise ValueError(f"not a systemd service name: {value!r} (e.g. sglang.service)")
        return value

    @field_validator("systemd_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"must be an absolute path on the host: {value!r}")
        return value

    def listed_hosts(self) -> tuple[str, ...]:
        return self.hosts

    def covered_hosts(self, study: str) -> tuple[str, ...]:
        return self.hosts or ((self.host,) if self.host else ())

    def for_host(self, host: str, study: str) -> SystemdSshTargetSettings:
        if not self.hosts:
            return self
        return self.model_copy(update={"host": host, "hosts": (host,)})

    def launch_prefix(self) -> tuple[str, ...]:
        return self.command

    @classmethod
    def starter(cls, model: str | None) -> dict[str, Any]:
        return {"host": "gpu-host.example", "user": SSHSettings.user, "unit": "sglang.service",
                "command": ["/opt/sglang/.venv/bin/python", "-m", "sglang.launch_server"],
                "server_port": SystemdSettings.server_port}

    @classmethod
    def starter_examples(cls) -> dict[str, Any]:
        return {**super().starter_examples(), "hosts": ["gpu-1.example", "gpu-2.example"],
                "key_file": "~/.ssh/id_ed25519", "known_hosts": "~/.ssh/known_hosts",
                "server_host": "gpu-host-data.example"}

    def restored_message(self) -> str:
        return f"removed spectune's drop-in and restarted {self.unit} with its own configuration"

    def check(self) -> Iterator[tuple[str, str]]:
        if self.hosts and self.host is not None:
            yield "host", "set host or hosts, not both"
        if not self.hosts and self.host is None:
            yield "host", "missing (required)"
        if len(self.hosts) > 1 and self.server_host:
            yield "server_host", "cannot be set with several hosts (each worker benchmarks its own)"

    def make_target(self, placement: Placement, table: OptionTable) -> SystemdSshTarget:
        # check() guarantees one of them; a worker's for_host() view has exactly its own host.
        ssh = SSHSettings(host=self.host or self.hosts[0], port=self.ssh_port, user=self.user,
                          key_file=self.key_file, known_hosts=self.known_hosts,
                          accept_unknown_host_key=self.accept_unknown_host_key,
                          connect_timeout_s=self.connect_timeout, sudo=self.sudo)
        return SystemdSshTarget(SystemdSettings(
            ssh=ssh, unit=self.unit, command=self.command, server_port=self.server_port,
            server_host=self.server_host, listen_host=self.listen_host,
            systemd_dir=self.systemd_dir,
            startup_timeout_s=self.startup_timeout, study=placement.study, python=self.python,
            resolver_fallback=self.when_sglang_cannot_judge == "rules",
            resolver_gpu=self.resolver_gpu(), unit_flags=self.unit_flags), table)
