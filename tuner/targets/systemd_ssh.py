"""The ``systemd-ssh`` target: a systemd service on a GPU host, reconfigured over SSH with a
drop-in.

Apply = upload ``UNIT.d/50-spectune.conf`` atomically (its ``ExecStart=`` carries the launch
command), then ``systemctl daemon-reload`` and ``systemctl restart UNIT``. The user's unit file is
never edited: deleting our drop-in (``restore``) brings back their configuration. ``restart`` blocks
until the old server is stopped, so the readiness poll can never be answered by the previous
configuration. While we wait, ``systemctl show`` tells us within about a second when the unit failed
(or went to ``auto-restart`` under ``Restart=``), and the journal of this start alone (``--since``
the restart) is classified.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tuner.core.durations import format_duration
from tuner.sglang.launch import LaunchCommand, ServerConfig, launch_command
from tuner.sglang.options import OptionTable, load_option_table
from tuner.sglang.versions import respelled
from tuner.targets.base import DeployFailed, Deployment, DeployPlan, TargetUnavailable
from tuner.targets.classify import ExitInfo, classify, telling_line
from tuner.targets.plan import readiness_text
from tuner.targets.preflight import check_flags
from tuner.targets.readiness import NotReady, probe, wait_ready
from tuner.targets.resolver import (
    RESOLVER_SCRIPT,
    AskingTarget,
    Pipe,
    SGLangResolver,
    interpreter_of_script,
    is_sglang_script,
    resolver_env,
    server_args_of,
    start_resolver,
)
from tuner.targets.settings import DEFAULT_STARTUP_TIMEOUT_S
from tuner.targets.ssh import Connection, RemoteCommandFailed, Result, SSHSettings
from tuner.targets.unit_command import (
    CARRIED_MARK,
    carried_by_dropin,
    carried_from_unit,
    dropped,
    exec_start_argv,
)
from tuner.targets.unit_file import DROPIN_NAME, marker_study, render_dropin

log = logging.getLogger(__name__)

READY_LINE = "The server is fired up and ready to roll!"
_DEAD_SUBSTATES = ("dead", "failed", "exited", "auto-restart")


@dataclass(frozen=True)
class SystemdSettings:
    ssh: SSHSettings
    unit: str
    command: tuple[str, ...]
    server_port: int = 30000
    server_host: str | None = None  # where the tuner connects; default: the SSH host
    listen_host: str = "0.0.0.0"  # the server's --host
    systemd_dir: str = "/etc/systemd/system"
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    restart_timeout_s: float = 300.0  # restart waits for the old server to stop (TimeoutStopSec)
    help_timeout_s: float = 120.0
    status_interval_s: float = 1.0
    study: str = "spectune"
    #: The Python whose SGLang the preflight asks (default: the one ``command`` runs).
    python: str | None = None
    #: ``[target] when_sglang_cannot_judge = "rules"``; ``[target] gpu`` as the resolver reads it
    #: (LocalSettings).
    resolver_fallback: bool = False
    resolver_gpu: str | None = None
    #: ``[target] unit_flags``: what to do with options the unit's command has and the study never
    #: emits.
    unit_flags: str = "refuse"

    @property
    def dropin_path(self) -> str:
        return f"{self.systemd_dir.rstrip('/')}/{self.unit}.d/{DROPIN_NAME}"

    @property
    def base_url(self) -> str:
        host = self.server_host or self.ssh.host
        return (f"http://[{host}]:{self.server_port}" if ":" in host
                else f"http://{host}:{self.server_port}")


class SystemdSshTarget(AskingTarget):
    kind = "systemd-ssh"

    def __init__(self, settings: SystemdSettings, table: OptionTable | None = None,
                 connection: Connection | None = None) -> None:
        self.settings = settings
        self.table = table or load_option_table()
        self.conn = connection or Connection(settings.ssh)
        self._since: int | None = None  # remote epoch second of our last restart (journal filter)
        self._checked = False
        self._was_active: bool | None = None
        self._last_status = 0.0
        self._resolver: SGLangResolver | None = None
        self._resolver_tried = False
        self._help: str | None = None  # the server's --help, once read
        self._unit_checked = False

    @property
    def where(self) -> str:
        return f"{self.settings.unit} on {self.settings.ssh.host}"

    def launch(self, config: ServerConfig) -> LaunchCommand:
        try:
            return launch_command(self.settings.command, respelled(config, self.table), self.table,
                                  [*self.carried, "--host", self.settings.listen_host,
                                   "--port", str(self.settings.server_port)])
        # an option this SGLang version does not have (or an ambiguous prefix)
        except LookupError as exc:
            raise DeployFailed("invalid-flags", str(exc)) from None

    # ----- preflight ------------------------------------------------------------------------------
    def preflight(self, flags: Iterable[str]) -> None:
        # read once; asked again with the target's own table's flags (tuner/app/preflight.py)
        if self._help is None:
            self._first_use()
            result = self.conn.run([*self.settings.command, "--help"], check=False, sudo=False,
                                   timeout_s=self.settings.help_timeout_s)
            text = result.stdout + result.stderr
            if not result.ok:
                raise TargetUnavailable(f"`{result.command}` on {self.settings.ssh.host} exited "
                                        f"{result.exit_status}: {telling_line(text)}")
            self._start_resolver()
            self._help = text
        check_flags(flags, self._help, where=self.settings.ssh.host)
        flags = list(flags)
        if flags and not self._unit_checked:
            self._check_unit_command(flags)

    def _check_unit_command(self, emitted: list[str]) -> None:
        """The unit's options the drop-in would drop: carried into every deploy, or the study
        refuses (``[target] unit_flags``; tuner/targets/unit_command.py)."""
        self._unit_checked = True
        s = self.settings
        ours = self._read_dropin()
        # our own drop-in is in force: the unit's command is not visible; it kept the list
        if ours is not None:
            carried, note = carried_by_dropin(ours, s.unit, self.where, s.unit_flags)
        else:
            argv = exec_start_argv(self._systemctl("show", "-p", "ExecStart", s.unit).stdout)
            if argv is None:
                return
            lost = dropped(argv, s.command, emitted, self.table)
            if not lost:
                return
            carried, note = carried_from_unit(lost, s.unit, s.ssh.host, s.unit_flags)
        if carried is not None:
            self.carried = carried
        self.notes = (*self.notes, note)

    def _start_resolver(self) -> None:
        """Ask the host's SGLang (the unit's interpreter) from now on — one process over this SSH
        connection for the whole study — when it can be imported there; else spectune's rules judge
        (one logged line)."""
        if self._resolver_tried:
            return
        self._resolver_tried = True
        python = self._interpreter()
        self._resolver = start_resolver(None if python is None
                                        else lambda: self._spawn_resolver(python),
                                        self.settings.command, where=self.settings.ssh.host,
                                        fallback=self.settings.resolver_fallback)

    def _interpreter(self) -> str | None:
        """``[target] python``, else the interpreter of the command the drop-in's ExecStart runs
        (``python -m sglang.launch_server``, or the ``#!`` line of an absolute
        ``.../bin/sglang``)."""
        if self.settings.python:
            return self.settings.python
        python, _ = server_args_of(self.settings.command)
        first = self.settings.command[0]
        if python is None and first.startswith("/") and is_sglang_script(first):
            head = self.conn.run(["head", "-n", "1", "--", first], check=False, sudo=False)
            python = interpreter_of_script(head.stdout) if head.ok else None
        return python

    def _spawn_resolver(self, python: str) -> Pipe | None:
        try:
            return self.conn.start([python, "-c", RESOLVER_SCRIPT],
                                   env=resolver_env(self.settings.resolver_gpu))
        except TargetUnavailable as exc:
            log.warning("%s: cannot start the SGLang resolver: %s", self.where, exc)
            return None


    def resolve(self, config: ServerConfig) -> dict[str, Any] | None:
        if self._resolver is None:
            return None
        _, fixed = server_args_of(self.settings.command)
        answer = self._resolver.check([*fixed, *self.launch(config).args])
        return answer.effective if answer is not None else None

    # ----- deploy ---------------------------------------------------------------------------------
    def deploy(self, config: ServerConfig) -> Deployment:
        # `spectune deploy`, without a preflight: the same check, on this command
        if not self._unit_checked:
            self._first_use()
            self._check_unit_command([name for name, _ in config.flags])
        launch = self.launch(config)
        # SGLang's own verdict first (cached): a configuration it refuses fails here, before the
        # unit restarts.
        effective = self.resolve(config)
        try:
            dropin = render_dropin(launch, self.settings.study)
        except ValueError as exc:  # an environment variable name systemd cannot take
            raise DeployFailed("invalid-flags", str(exc)) from None
        # remembered in the drop-in: while it is in force the unit's own command is not visible
        if self.carried:
            dropin = f"{CARRIED_MARK}{shlex.join(self.carried)}\n{dropin}"
        self._first_use()
        started = time.monotonic()
        s = self.settings
        self.conn.put(dropin.encode(), s.dropin_path)
        self._systemctl("daemon-reload")
        self._since = int(self.conn.run(["date", "+%s"], sudo=False).stdout.strip())
        restarted = self._systemctl("restart", s.unit, check=False, timeout_s=s.restart_timeout_s)
        deploy_s = time.monotonic() - started
        if not restarted.ok:
            # systemd could not even start it (e.g. the executable is missing): the journal says
            # why.
            tail = self.log_tail(200)
            verdict = classify(tail, self._exit_info(force=True))
            raise DeployFailed(verdict.failure_class, f"`systemctl restart {s.unit}` failed: "
                               f"{restarted.stderr.strip()} — {verdict.reason}", tail)
        self._last_status = 0.0
        try:
            ready = wait_ready(s.base_url, timeout_s=s.startup_timeout_s, watch=self._exit_info)
        except NotReady as exc:
            raise self._failure(exc) from None
        return Deployment(config=config, launch=launch, base_url=s.base_url, deploy_s=deploy_s,
                          ready_s=ready.elapsed_s,
                          log_location=f"journalctl -u {s.unit} --since @{self._since}",
                          effective=effective)

    def _failure(self, exc: NotReady) -> DeployFailed:
        tail = self.log_tail(200)
        if exc.exit is not None:
            verdict = classify(tail, exc.exit)
            return DeployFailed(verdict.failure_class, f"{self.where}: {exc}: {verdict.reason}",
                                tail)
        # "Ready" in the log but no answer: unreachable from here — unless it answers now, i.e. it
        # only became ready after the startup timeout (the log tail is fetched after the wait
        # ended).
        if (not exc.connected and READY_LINE in tail
                and probe(self.settings.base_url, "/health", timeout_s=2.0) != 200):
            return DeployFailed("unreachable", f"{self.where} logged that it is ready, but "
                                               f"{self.settings.base_url} "
                                f"never answered ({exc.last_error}); check --host/server_host and "
                                "firewalls", tail)
        return DeployFailed("startup-timeout", f"{self.where}: {exc}", tail)

    def exit_info(self) -> ExitInfo | None:
        return self._exit_info(force=True)

    def _exit_info(self, force: bool = False) -> ExitInfo | None:
        """None while the unit runs (or is starting); how it ended otherwise. At most one SSH round
        trip per ``status_interval_s``: readiness polls more often than that."""
        now = time.monotonic()
        if not force and now - self._last_status < self.settings.status_interval_s:
            return None
        self._last_status = now
        props = self._show("ActiveState", "SubState", "ExecMainCode", "ExecMainStatus")
        if props.get("ActiveState") not in ("failed", "inactive") \
                and props.get("SubState") not in _DEAD_SUBSTATES:
            return None
        status = int(props.get("ExecMainStatus") or 0)
        # ExecMainCode is the waitid() si_code: 1 exited, 2 killed, 3 dumped core.
        return ExitInfo(signal=status) if props.get("ExecMainCode") in ("2", "3") else ExitInfo(
            code=status)

    def plan(self, config: ServerConfig) -> DeployPlan:
        s = self.settings
        sudo = " (through sudo)" if s.ssh.sudo else ""
        return DeployPlan(
            title=f"drop-in {s.dropin_path} on {s.ssh.host}",
            text=render_dropin(self.launch(config), s.study),
            steps=(f"upload it atomically over SSH{sudo}; the unit file itself is never edited",
                   "systemctl daemon-reload",
                   f"systemctl restart {s.unit} (returns once the old server stopped; at most "
                   f"{format_duration(s.restart_timeout_s)})"),
            preflight=(f"SSH login {s.ssh.where} (at most "
                       f"{format_duration(s.ssh.connect_timeout_s)} per attempt, "
                       "host key checked against known_hosts)",
                       f"read {s.dropin_path}: one spectune did not write is never overwritten "
                       "(stop: exit 3)",
                       f"`systemctl is-active {s.unit}`: whether restore restarts or stops it at "
                       "the end",
                       f"`{shlex.join([*s.command, '--help'])}` on {s.ssh.host}: every option the "
                       "study can set must be listed",
                       f"`{s.python or 'the command’s python'} -c <resolver>` on {s.ssh.host}: its "
                       "SGLang lists its option table (the study is checked against it) and judges "
                       "every command line before it is deployed; where it cannot judge the study "
                       "stops here: exit 3"),
            readiness=readiness_text(s.base_url, s.startup_timeout_s,
                                     f"`systemctl show {s.unit}` every {s.status_interval_s:g} s: "
                                     "a failed unit ends the wait, classified from its journal"))

    def check_access(self) -> tuple[str, ...]:
        s = self.settings
        props = self.unit_state()  # logs in, reads the drop-in path, asks systemd
        if props.get("LoadState") == "not-found":
            raise TargetUnavailable(
                f"{s.unit} is not a unit on {s.ssh.host} (systemctl: LoadState=not-found)")
        lines = [f"SSH login {s.ssh.where}: ok",
                 f"{s.unit}: {props.get('ActiveState') or 'unknown'} "
                 f"({props.get('SubState') or 'unknown'})"]
        leftover = self.detect_leftover()
        lines.append(f"{leftover}: the first deploy replaces it" if leftover
                     else f"no drop-in at {s.dropin_path} yet")
        return tuple(lines)

    def unit_state(self) -> dict[str, str]:
        """Log in, check the drop-in path is ours to write (as before a first deploy), and ask
        systemd."""
        self._first_use()
        return self._show("LoadState", "ActiveState", "SubState")

    def _show(self, *names: str) -> dict[str, str]:
        result = self._systemctl("show", "-p", ",".join(names), self.settings.unit)
        return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)

    def _systemctl(self, *args: str, check: bool = True, timeout_s: float | None = None) -> Result:
        return self.conn.run(["systemctl", *args], check=check, timeout_s=timeout_s)

    # ----- first contact, leftovers, restore ------------------------------------------------------
    def _read_dropin(self) -> str | None:
        result = self.conn.run(["cat", "--", self.settings.dropin_path], check=False)
        if result.ok:
            return result.stdout
        if "No such file" in result.stderr:
            return None
        raise RemoteCommandFailed(result, self.settings.ssh.where)

    def _first_use(self) -> None:
        """Once per target: note whether the unit runs, and make sure a drop-in at our path is
        ours."""
        if self._checked:
            return
        text = self._read_dropin()
        if text is not None and marker_study(text) is None:
            raise TargetUnavailable(
                f"{self.settings.dropin_path} on {self.settings.ssh.host} exists and was not "
                "written by spectune; refusing to overwrite it (rename it or "
                "remove it)")
        if text is not None:
            log.warning("%s: found a drop-in left by an interrupted spectune run (study %r); it is "
                        "replaced by the next deploy and removed by "
                        "restore", self.where, marker_study(text))
        active = self._systemctl("is-active", self.settings.unit, check=False)
        self._was_active = active.stdout.strip() in ("active", "activating", "reloading")
        self._checked = True

    def detect_leftover(self) -> str | None:
        text = self._read_dropin()
        study = marker_study(text) if text is not None else None
        if study is None:
            return None
        return (f"{self.settings.dropin_path} on {self.settings.ssh.host} (written by spectune, "
                f"study {study!r})")

    def restore(self) -> None:
        """Remove our drop-in, reload, and restart the unit with its own configuration (or leave it
        stopped when it was stopped before we first touched it). Does nothing when no drop-in of
        ours is there."""
        text = self._read_dropin()
        if text is None or marker_study(text) is None:
            return
        was_active = self._was_active  # None when this process never looked: restart then
        self.conn.run(["rm", "-f", "--", self.settings.dropin_path])
        self._systemctl("daemon-reload")
        if was_active is False:
            self._systemctl("stop", self.settings.unit, timeout_s=self.settings.restart_timeout_s)
        else:
            self._systemctl("restart", self.settings.unit,
                            timeout_s=self.settings.restart_timeout_s)

    def log_tail(self, lines: int = 50) -> str:
        argv = ["journalctl", "-u", self.settings.unit, "-n", str(lines), "--no-pager", "-o", "cat"]
        if self._since is not None:
            argv += ["--since", f"@{self._since}"]
        result = self.conn.run(argv, check=False)
        return result.stdout

    def close(self) -> None:
        if self._resolver is not None:
            self._resolver.close()
            self._resolver = None
        self.conn.close()
