"""What a target would do for one configuration, described without doing it (``spectune validate --plan``).

Each target renders its own plan from the same code that deploys — ``launch()`` and, for systemd, the drop-in
renderer — so the plan is the exact text a deploy would write or run, not a description of it.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuner.core.durations import format_duration
from tuner.targets.base import TargetUnavailable
from tuner.targets.readiness import READY_PATHS
from tuner.targets.resolver import server_args_of
from tuner.targets.unit_file import render_dropin

if TYPE_CHECKING:
    from tuner.sglang.launch import ServerConfig
    from tuner.targets.local import LocalTarget
    from tuner.targets.systemd_ssh import SystemdSshTarget


@dataclass(frozen=True)
class DeployPlan:
    #: What ``text`` is: "drop-in /etc/systemd/system/x.service.d/50-spectune.conf on gpu-host", "command line".
    title: str
    #: The drop-in's text or the shell command line, exactly as deployed.
    text: str
    #: How one deploy applies it, in order.
    steps: tuple[str, ...]
    #: What runs once before the first trial.
    preflight: tuple[str, ...]
    #: How readiness is decided.
    readiness: str


# ----- the kinds' plans (each target's ``plan``/``check_access`` method calls its own) ----------------------
def local_plan(target: LocalTarget, config: ServerConfig) -> DeployPlan:
    s = target.settings
    python, _ = server_args_of(s.command)
    preflight = [f"`{shlex.join([*s.command, '--help'])}` (at most {format_duration(s.help_timeout_s)}): every "
                 "option the study can set must be listed"]
    if python is not None:
        preflight.append(f"`{python} -c <resolver>`: this machine's SGLang lists its option table (the study is "
                         "checked against it) and judges every command line before it is deployed, the first one "
                         "now; where it cannot judge (no GPU visible to it, a missing module) the study stops "
                         "here: exit 3 ([target] when_sglang_cannot_judge)")
    preflight.append(f"stop a server an interrupted run of study {s.study!r} left (SPECTUNE_STUDY in its "
                     "environment)")
    return DeployPlan(
        title="command line (a child process group of spectune on this machine)",
        text=target.launch(config).shell(multiline=True),
        steps=(f"stop the previous trial's server (SIGTERM to its process group, SIGKILL after "
               f"{format_duration(s.stop_grace_s)})",
               f"check that port {s.port} on {s.host} is free (else stop: exit 3)",
               f"start it in a new session, output to {s.log_dir}/<date>-<pid>-<n>.log"),
        preflight=tuple(preflight),
        readiness=_readiness(target.base_url, s.startup_timeout_s, "the process is watched: an exit ends the wait "
                                                                   "at once, classified from its log"))


def local_access(target: LocalTarget) -> tuple[str, ...]:
    s = target.settings
    found = shutil.which(s.command[0])
    if found is None:
        raise TargetUnavailable(f"server command not found: {s.command[0]}")
    lines = [f"server command found: {found}"]
    target.check_port_free()
    lines.append(f"port {s.port} on {s.host or '0.0.0.0'} is free")
    leftover = target.detect_leftover()
    if leftover:
        lines.append(f"{leftover}: the first deploy stops it")
    return tuple(lines)


def systemd_plan(target: SystemdSshTarget, config: ServerConfig) -> DeployPlan:
    s = target.settings
    sudo = " (through sudo)" if s.ssh.sudo else ""
    return DeployPlan(
        title=f"drop-in {s.dropin_path} on {s.ssh.host}",
        text=render_dropin(target.launch(config), s.study),
        steps=(f"upload it atomically over SSH{sudo}; the unit file itself is never edited",
               "systemctl daemon-reload",
               f"systemctl restart {s.unit} (returns once the old server stopped; at most "
               f"{format_duration(s.restart_timeout_s)})"),
        preflight=(f"SSH login {s.ssh.where} (at most {format_duration(s.ssh.connect_timeout_s)} per attempt, "
                   "host key checked against known_hosts)",
                   f"read {s.dropin_path}: one spectune did not write is never overwritten (stop: exit 3)",
                   f"`systemctl is-active {s.unit}`: whether restore restarts or stops it at the end",
                   f"`{shlex.join([*s.command, '--help'])}` on {s.ssh.host}: every option the study can set must be "
                   "listed",
                   f"`{s.python or 'the command’s python'} -c <resolver>` on {s.ssh.host}: its SGLang lists its "
                   "option table (the study is checked against it) and judges every command line before it is "
                   "deployed; where it cannot judge the study stops here: exit 3"),
        readiness=_readiness(s.base_url, s.startup_timeout_s, f"`systemctl show {s.unit}` every "
                             f"{s.status_interval_s:g} s: a failed unit ends the wait, classified from its journal"))


def systemd_access(target: SystemdSshTarget) -> tuple[str, ...]:
    s = target.settings
    props = target.unit_state()  # logs in, reads the drop-in path, asks systemd
    if props.get("LoadState") == "not-found":
        raise TargetUnavailable(f"{s.unit} is not a unit on {s.ssh.host} (systemctl: LoadState=not-found)")
    lines = [f"SSH login {s.ssh.where}: ok",
             f"{s.unit}: {props.get('ActiveState') or 'unknown'} ({props.get('SubState') or 'unknown'})"]
    leftover = target.detect_leftover()
    lines.append(f"{leftover}: the first deploy replaces it" if leftover else f"no drop-in at {s.dropin_path} yet")
    return tuple(lines)


def _readiness(base_url: str, timeout_s: float, watch: str) -> str:
    paths = " (else ".join(READY_PATHS) + ")" * (len(READY_PATHS) - 1)
    return (f"GET {base_url}{paths} until it answers 200, at most {format_duration(timeout_s)} (startup_timeout); "
            f"{watch}")
