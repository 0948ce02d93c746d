"""Deployment targets: where and how a server configuration is applied (see ``base.Target``).

``make_target`` is the one place that maps a study file's ``[target] kind`` to an implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.sglang.options import OptionTable, load_option_table
from tuner.study.spec import StudySpec
from tuner.targets.base import DeployFailed, Deployment, FailureClass, Target, TargetUnavailable
from tuner.targets.local import LocalSettings, LocalTarget
from tuner.targets.simulated import SimulatedSettings, SimulatedTarget
from tuner.targets.ssh import SSHSettings
from tuner.targets.systemd_ssh import SystemdSettings, SystemdSshTarget

__all__ = ["DeployFailed", "Deployment", "FailureClass", "Target", "TargetUnavailable", "make_target"]


def _log_dir(spec: StudySpec, settings: dict[str, Any]) -> Path:
    """``log_dir`` relative to the study file; default ``.spectune/<study>/logs`` beside it."""
    base = spec.path.resolve().parent
    given = settings.get("log_dir")
    return (base / Path(given).expanduser()) if given else base / ".spectune" / spec.study.name / "logs"


def _simulated(spec: StudySpec, table: OptionTable) -> Target:
    s = spec.target.settings
    return SimulatedTarget(SimulatedSettings(
        log_dir=_log_dir(spec, s), profile=s.get("profile"), time_scale=float(s.get("time_scale", 1.0)),
        seed=int(s.get("seed", 0)), port=int(s.get("port", 0)), startup_timeout_s=spec.target.startup_timeout_s,
        study=spec.study.name), table)


def _local(spec: StudySpec, table: OptionTable) -> Target:
    s = spec.target.settings
    return LocalTarget(LocalSettings(
        command=tuple(s["command"]), log_dir=_log_dir(spec, s), host=s.get("host", "127.0.0.1"),
        port=int(s.get("port", 30000)), stop_grace_s=float(s.get("stop_grace", 30.0)),
        startup_timeout_s=spec.target.startup_timeout_s, study=spec.study.name), table)


def _systemd_ssh(spec: StudySpec, table: OptionTable) -> Target:
    s = spec.target.settings
    ssh = SSHSettings(
        host=s["host"], port=int(s.get("ssh_port", 22)), user=s.get("user", "root"), key_file=s.get("key_file"),
        known_hosts=s.get("known_hosts"), accept_unknown_host_key=bool(s.get("accept_unknown_host_key", False)),
        connect_timeout_s=float(s.get("connect_timeout", 15.0)), sudo=bool(s.get("sudo", False)))
    return SystemdSshTarget(SystemdSettings(
        ssh=ssh, unit=s["unit"], command=tuple(s["command"]), server_port=int(s.get("server_port", 30000)),
        server_host=s.get("server_host"), listen_host=s.get("listen_host", "0.0.0.0"),
        systemd_dir=s.get("systemd_dir", "/etc/systemd/system"), startup_timeout_s=spec.target.startup_timeout_s,
        study=spec.study.name), table)


TARGETS: dict[str, Callable[[StudySpec, OptionTable], Target]] = {
    "simulated": _simulated,
    "local": _local,
    "systemd-ssh": _systemd_ssh,
}


def make_target(spec: StudySpec) -> Target:
    """The target a study file describes. Nothing is contacted until the first call on it."""
    return TARGETS[spec.target.kind](spec, load_option_table(spec.study.sglang_version))
