"""The ``local`` target: the server as a child process group on this machine.

Each deploy stops the previous server (SIGTERM to its whole process group — SGLang forks scheduler
and detokenizer processes — then SIGKILL after ``stop_grace``), checks that the port is free, and
starts the launch command in a new session with its output in one log file per deploy. The child's
environment carries ``SPECTUNE_STUDY`` so a server left by an interrupted run can be recognised as
ours (and stopped) by the next run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tuner.core.durations import format_duration
from tuner.core.faults import fault_point
from tuner.sglang.launch import LaunchCommand, ServerConfig, launch_command
from tuner.sglang.options import OptionTable, load_option_table
from tuner.sglang.versions import respelled
from tuner.targets.base import DeployFailed, Deployment, DeployPlan, TargetUnavailable
from tuner.targets.classify import ExitInfo, classify, telling_line
from tuner.targets.plan import readiness_text
from tuner.targets.preflight import check_flags
from tuner.targets.process_group import (
    STUDY_ENV,
    TARGET_ENV,
    group_of,
    marked_processes,
    stop_group,
    tail_file,
)
from tuner.targets.readiness import NotReady, ReadinessPolicy, wait_ready
from tuner.targets.resolver import (
    RESOLVER_SCRIPT,
    AskingTarget,
    ProcessPipe,
    SGLangResolver,
    interpreter_of_script,
    is_sglang_script,
    resolver_env,
    server_args_of,
    start_resolver,
)
from tuner.targets.settings import DEFAULT_STARTUP_TIMEOUT_S

log = logging.getLogger(__name__)

PID_FILE = "server.pid"


@dataclass(frozen=True)
class LocalSettings:
    """What a running ``LocalTarget`` needs, resolved: the log folder as a path under the study's
    folder, the study's name, the resolver's choices. The study file's model
    (``LocalTargetSettings`` below) takes its defaults from these fields and builds one
    (``make_target``): the file's spelling (durations, a relative log_dir) stays in the model, so a
    test or the simulated target can drive a local server without a file."""

    command: tuple[str, ...]
    log_dir: Path
    host: str = "127.0.0.1"
    port: int = 30000
    stop_grace_s: float = 30.0
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    help_timeout_s: float = 120.0
    study: str = "spectune"
    #: ``[target] when_sglang_cannot_judge = "rules"``: spectune's rules judge where SGLang cannot
    #: (else exit 3).
    resolver_fallback: bool = False
    #: ``[target] gpu`` for the resolver where nvidia-smi cannot be asked
    #: (``TargetSettings.resolver_gpu``).
    resolver_gpu: str | None = None


class LocalTarget(AskingTarget):
    kind = "local"
    #: How often readiness is polled while the server starts.
    readiness = ReadinessPolicy()

    def __init__(self, settings: LocalSettings, table: OptionTable | None = None) -> None:
        self.settings = settings
        self.table = table or load_option_table()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self._deploys = 0
        self._leftover_checked = False
        self._resolver: SGLangResolver | None = None
        self._help: str | None = None  # the server's --help, once read

    @property
    def base_url(self) -> str:
        host = self.settings.host
        connect = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else host)
        return f"http://{connect}:{self.settings.port}"

    def launch(self, config: ServerConfig) -> LaunchCommand:
        try:
            return launch_command(self.settings.command, respelled(config, self.table), self.table,
                                  ["--host", self.settings.host, "--port", str(self.settings.port)])
        # an option this SGLang version does not have (or an ambiguous prefix)
        except LookupError as exc:
            raise DeployFailed("invalid-flags", str(exc)) from None

    # ----- preflight ------------------------------------------------------------------------------
    def preflight(self, flags: Iterable[str]) -> None:
        # asked again with the flags of the target's own table (tuner/app/preflight.py)
        if self._help is not None:
            check_flags(flags, self._help, where="this machine")
            return
        # a leftover server of ours is stopped by the first deploy instead
        if self.detect_leftover() is None:
            # Before any trial: a port someone else holds stops the study here, leaving no
            # interrupted trial and no re-queued one behind (it used to end the first trial, on
            # every attempt).
            self.check_port_free()
        argv = [*self.settings.command, "--help"]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=self.settings.help_timeout_s,
                                  check=False, env=self._env(()), stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise TargetUnavailable(f"server command not found: {argv[0]}") from None
        except subprocess.TimeoutExpired:
            raise TargetUnavailable(f"`{' '.join(argv)}` did not answer within "
                                    f"{self.settings.help_timeout_s:g} s") from None
        text = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        if done.returncode != 0:
            raise TargetUnavailable(
                f"`{' '.join(argv)}` exited {done.returncode}: {telling_line(text)}")
        self._start_resolver()
        check_flags(flags, text, where="this machine")
        self._help = text

    def _start_resolver(self) -> None:
        """Ask this machine's SGLang (the command's interpreter) from now on, when it can be
        imported."""
        if self._resolver is not None:
            return
        python, _ = server_args_of(self.settings.command)
        first = self.settings.command[0]
        if python is None and is_sglang_script(first):  # a console script: the Python of its #!
            with contextlib.suppress(OSError):
                script = shutil.which(first)
                python = (interpreter_of_script(Path(script).read_text(errors="replace")[:512])
                          if script else None)
        env = {**self._env(()), **resolver_env(self.settings.resolver_gpu)}
        self._resolver = start_resolver(
            None if python is None
            else lambda: ProcessPipe.spawn([python, "-c", RESOLVER_SCRIPT], env),
            self.settings.command, where="this machine", fallback=self.settings.resolver_fallback)


    def resolve(self, config: ServerConfig) -> dict[str, Any] | None:
        if self._resolver is None:
            return None
        answer = self._resolver.check(self._server_argv(self.launch(config)))
        return answer.effective if answer is not None else None

    # ----- deploy ---------------------------------------------------------------------------------
    def deploy(self, config: ServerConfig) -> Deployment:
        launch = self.launch(config)
        # SGLang's own verdict first (cached): a configuration it refuses fails here in seconds,
        # before any restart.
        effective = self.resolve(config)
        self._handle_leftover()
        self._stop()
        self.check_port_free()
        started = time.monotonic()
        self._log_path = self._start(launch.argv, launch.env)
        deploy_s = time.monotonic() - started
        try:
            ready = wait_ready(self.base_url, timeout_s=self.settings.startup_timeout_s,
                               watch=self._exit_info, policy=self.readiness)
        except NotReady as exc:
            raise self._failure(exc) from None
        return Deployment(config=config, launch=launch, base_url=self.base_url, deploy_s=deploy_s,
                          ready_s=ready.elapsed_s, log_location=str(self._log_path),
                          effective=effective)

    def _server_argv(self, launch: LaunchCommand) -> list[str]:
        _, fixed = server_args_of(self.settings.command)
        return [*fixed, *launch.args]

    def _failure(self, exc: NotReady) -> DeployFailed:
        if exc.exit is None:
            # Timed out: stop it, so a slow configuration does not hold the port and the GPUs.
            self._stop()
            return DeployFailed("startup-timeout", str(exc), self.log_tail(200))
        tail = self.log_tail(200)
        verdict = classify(tail, exc.exit)
        self._stop()
        return DeployFailed(verdict.failure_class, f"{exc}: {verdict.reason}", tail)

    def _start(self, argv: Sequence[str], env: Iterable[tuple[str, str]]) -> Path:
        self.settings.log_dir.mkdir(parents=True, exist_ok=True)
        self._deploys += 1
        log_path = (self.settings.log_dir
                    / f"{datetime.now():%Y%m%d-%H%M%S}-{os.getpid()}-{self._deploys:03d}.log")
        with open(log_path, "ab") as log_file:
            try:
                # A new session: the server and everything it forks share one process group we can
                # signal, and a Ctrl-C in the terminal reaches only us (we then restore in order).
                proc = subprocess.Popen(list(argv), stdout=log_file, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=self._env(env),
                                        start_new_session=True)
            except FileNotFoundError:
                raise TargetUnavailable(f"server command not found: {argv[0]}") from None
        # At once: an interrupt landing on the next line must find the server to stop.
        self._proc = proc
        # A death right here leaves a server without a pid file: the next run still finds it by its
        # marker.
        fault_point("after_spawn")
        (self.settings.log_dir / PID_FILE).write_text(f"{proc.pid}\n")
        return log_path

    def _env(self, extra: Iterable[tuple[str, str]]) -> dict[str, str]:
        # Unbuffered Python output: the log tail we classify must hold the last lines before an
        # exit.
        return {**os.environ, "PYTHONUNBUFFERED": "1", **dict(extra),
                STUDY_ENV: self.settings.study, TARGET_ENV: self._target_marker}

    @property
    def _target_marker(self) -> str:
        return str(self.settings.log_dir.resolve())

    def exit_info(self) -> ExitInfo | None:
        return self._exit_info()

    def _exit_info(self) -> ExitInfo | None:
        code = self._proc.poll() if self._proc is not None else None
        if code is None:
            return None
        return ExitInfo(signal=-code) if code < 0 else ExitInfo(code=code)

    def check_port_free(self) -> None:
        host = self.settings.host or "0.0.0.0"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            # SO_REUSEADDR as servers set it: a port in TIME_WAIT after our last server is free for
            # the next.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, self.settings.port))
            except OSError as exc:
                raise PortInUse(
                    f"port {self.settings.port} on {host} is already in use ({exc.strerror}); stop "
                    f"what listens there or choose another port in [target]") from None

    def plan(self, config: ServerConfig) -> DeployPlan:
        s = self.settings
        python, _ = server_args_of(s.command)
        preflight = [f"`{shlex.join([*s.command, '--help'])}` (at most "
                     f"{format_duration(s.help_timeout_s)}): every "
                     "option the study can set must be listed"]
        if python is not None:
            preflight.append(f"`{python} -c <resolver>`: this machine's SGLang lists its option "
                             "table (the study is checked against it) and judges every command "
                             "line before it is deployed, the first one now; where it cannot judge "
                             "(no GPU visible to it, a missing module) the study stops here: exit "
                             "3 ([target] when_sglang_cannot_judge)")
        preflight.append(
            f"stop a server an interrupted run of study {s.study!r} left (SPECTUNE_STUDY in its "
            "environment)")
        return DeployPlan(
            title="command line (a child process group of spectune on this machine)",
            text=self.launch(config).shell(multiline=True),
            steps=(f"stop the previous trial's server (SIGTERM to its process group, SIGKILL after "
                   f"{format_duration(s.stop_grace_s)})",
                   f"check that port {s.port} on {s.host} is free (else stop: exit 3)",
                   f"start it in a new session, output to {s.log_dir}/<date>-<pid>-<n>.log"),
            preflight=tuple(preflight),
            readiness=readiness_text(self.base_url, s.startup_timeout_s,
                                     "the process is watched: an exit ends the wait at once, "
                                     "classified from its log"))

    def check_access(self) -> tuple[str, ...]:
        s = self.settings
        found = shutil.which(s.command[0])
        if found is None:
            raise TargetUnavailable(f"server command not found: {s.command[0]}")
        lines = [f"server command found: {found}"]
        self.check_port_free()
        lines.append(f"port {s.port} on {s.host or '0.0.0.0'} is free")
        leftover = self.detect_leftover()
        if leftover:
            lines.append(f"{leftover}: the first deploy stops it")
        return tuple(lines)

    # ----- stop / restore -------------------------------------------------------------------------
    def _stop(self) -> None:
        if self._proc is None:
            return
        stop_group(self._proc.pid, self.settings.stop_grace_s, self._proc)
        self._proc = None
        (self.settings.log_dir / PID_FILE).unlink(missing_ok=True)

    def restore(self) -> None:
        """Stop the server we started (a local server has no configuration of its own to go back
        to), and one an interrupted run left — looked for afresh: whatever this run lost track of is
        stopped too."""
        self._stop()
        self._leftover_checked = False
        self._handle_leftover()

    def close(self) -> None:
        """Ends the SGLang resolver. The server keeps running (``[finish] deploy = "best"`` leaves
        it up)."""
        if self._resolver is not None:
            self._resolver.close()
            self._resolver = None

    # ----- leftovers ------------------------------------------------------------------------------
    def detect_leftover(self) -> str | None:
        pid = self._leftover_pid()
        return (None if pid is None
                else f"a server of study {self.settings.study!r} is still running (pid {pid})")

    def _leftover_pid(self) -> int | None:
        """A live server of this study that is not ours: the one in the pid file, or — a run killed
        between spawning its server and writing the pid file leaves none — any process carrying the
        study's marker."""
        mine = self._proc.pid if self._proc is not None else None
        try:
            pid: int | None = int((self.settings.log_dir / PID_FILE).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = None
        if pid is not None and pid != mine and self._is_marked(pid):
            return pid
        scanned = marked_processes(self.settings.study, target=self._target_marker)
        return next((p for p in scanned if group_of(p) not in (mine, group_of(0))), None)

    def _is_marked(self, pid: int) -> bool:
        return pid in marked_processes(self.settings.study, (pid,))

    def _handle_leftover(self) -> None:
        if self._leftover_checked:
            return
        self._leftover_checked = True
        while (pid := self._leftover_pid()) is not None:
            log.warning("stopping a server left running by an interrupted run (pid %d)", pid)
            stop_group(group_of(pid) or pid, self.settings.stop_grace_s, None)
            if pid in marked_processes(self.settings.study, (pid,)):  # not ours to stop after all
                break
        (self.settings.log_dir / PID_FILE).unlink(missing_ok=True)

    # ----- logs -----------------------------------------------------------------------------------
    @property
    def log_location(self) -> str | None:
        """The log file of the server started last, kept after a failed start (stored on its
        trial)."""
        return str(self._log_path) if self._log_path is not None else None

    def log_tail(self, lines: int = 50) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        return tail_file(self._log_path, lines)


class PortInUse(TargetUnavailable):
    """The server's port is taken by another program: waiting will not free it, so the study stops
    at once."""

    retryable = False
