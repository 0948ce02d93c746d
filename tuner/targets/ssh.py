"""A small, honest SSH connection on paramiko: host keys verified, every command bounded in time.

Like fabric's ``Connection``: parameters are stored and the connection opens lazily; ``run`` returns
a ``Result``; a non-zero exit raises unless ``check=False``. Commands are argv lists and are quoted
here with ``shlex.quote`` word by word — the remote login shell sees each word as one literal
argument, so a value holding ``;``, ``$()``, backquotes or a newline can never become a command. A
dropped connection is re-opened (bounded retries) and the command is sent again; every command
spectune sends is idempotent for that reason.
"""

from __future__ import annotations

import base64
import hashlib
import select
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import paramiko

from tuner.targets.base import TargetUnavailable
from tuner.targets.classify import telling_line


@dataclass(frozen=True)
class SSHSettings:
    host: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    known_hosts: str | None = None  # default: ~/.ssh/known_hosts
    accept_unknown_host_key: bool = False
    connect_timeout_s: float = 15.0
    command_timeout_s: float = 60.0
    sudo: bool = False
    connect_attempts: int = 3

    @property
    def where(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


@dataclass(frozen=True)
class Result:
    command: str
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class RemoteCommandFailed(TargetUnavailable):
    """A remote command exited non-zero (raised by ``run`` unless ``check=False``)."""

    def __init__(self, result: Result, where: str) -> None:
        self.result = result
        detail = telling_line(result.stderr) or telling_line(result.stdout)  # one line
        super().__init__(f"on {where}: `{result.command}` exited {result.exit_status}: {detail}")


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return f"{key.get_name()} SHA256:{base64.b64encode(digest).decode().rstrip('=')}"


class _UnknownHostKey(Exception):
    def __init__(self, key: paramiko.PKey) -> None:
        self.key = key


class _RefuseUnknown(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        raise _UnknownHostKey(key)


class _AcceptUnknown(paramiko.MissingHostKeyPolicy):
    """Trust a host that is not in known_hosts for this process only (the user opted in). A
    *changed* key is still refused: paramiko raises ``BadHostKeyException`` before consulting a
    policy."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)


class Connection:
    def __init__(self, settings: SSHSettings) -> None:
        self.settings = settings
        self._client: paramiko.SSHClient | None = None
        self.opened = 0  # how many times a connection was (re)opened; tests read it

    # ----- connecting -----------------------------------------------------------------------------
    def is_open(self) -> bool:
        transport = self._client.get_transport() if self._client is not None else None
        return transport is not None and transport.is_active()

    def open(self) -> None:
        """Open (or re-open) the connection, retrying network errors; host key and auth errors are
        final."""
        if self.is_open():
            return
        self.close()
        s = self.settings
        last: Exception | None = None
        for attempt in range(s.connect_attempts):
            if attempt:
                time.sleep(min(0.5 * 2 ** (attempt - 1), 4.0))
            try:
                self._client = self._connect()
                self.opened += 1
                return
            except (OSError, paramiko.SSHException, EOFError) as exc:
                if isinstance(exc, paramiko.AuthenticationException | paramiko.BadHostKeyException):
                    raise
                last = exc
        raise TargetUnavailable(
            f"cannot reach {s.where} after {s.connect_attempts} attempts: {last}")

    def _connect(self) -> paramiko.SSHClient:
        s = self.settings
        client = paramiko.SSHClient()
        known = (Path(s.known_hosts).expanduser() if s.known_hosts
                 else Path("~/.ssh/known_hosts").expanduser())
        if known.is_file():
            client.load_host_keys(str(known))
        client.set_missing_host_key_policy(_AcceptUnknown() if s.accept_unknown_host_key
                                           else _RefuseUnknown())
        try:
            client.connect(
                s.host, port=s.port, username=s.user, key_filename=s.key_file,
                allow_agent=True, look_for_keys=s.key_file is None,
                timeout=s.connect_timeout_s, banner_timeout=s.connect_timeout_s,
                auth_timeout=s.connect_timeout_s,
            )
        except _UnknownHostKey as exc:
            client.close()
            host = s.host if s.port == 22 else f"[{s.host}]:{s.port}"
            raise TargetUnavailable(
                f"the SSH host key of {host} ({fingerprint(exc.key)}) is not in {known}; refusing "
                "to connect. Check the fingerprint on the host (ssh-keygen -lf "
                f"/etc/ssh/ssh_host_*_key.pub), then add it (ssh-keyscan -p {s.port} {s.host} >> "
                f"{known}), or set "
                "accept_unknown_host_key = true"
            ) from None
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise TargetUnavailable(
                f"the SSH host key of {s.host}:{s.port} has CHANGED (expected "
                f"{fingerprint(exc.expected_key)}, got {fingerprint(exc.key)}) — refusing to "
                "connect: this may be a man-in-the-middle attack. If the host was reinstalled, "
                f"remove the old key (ssh-keygen -R {s.host}) and add the new one to {known}"
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            how = f"key {s.key_file}" if s.key_file else "the SSH agent and ~/.ssh keys"
            raise TargetUnavailable(
                f"SSH authentication as {s.where} failed with {how}: {exc}") from None
        except BaseException:
            client.close()
            raise
        transport = client.get_transport()
        if transport is not None:
            # notice a dead link between trials instead of at the next command
            transport.set_keepalive(15)
        return client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # ----- commands -------------------------------------------------------------------------------
    def command_line(self, argv: Sequence[str], *, sudo: bool | None = None) -> str:
        """The remote shell text for ``argv``: each word quoted on its own (``sudo -n`` in front if
        asked)."""
        use_sudo = self.settings.sudo if sudo is None else sudo
        words = ["sudo", "-n", "--", *argv] if use_sudo else list(argv)
        return shlex.join(words)

    def run(self, argv: Sequence[str], *, check: bool = True, timeout_s: float | None = None,
            stdin: bytes | None = None, sudo: bool | None = None) -> Result:
        """Run ``argv`` remotely; re-open the connection once if it dropped. Never waits past
        ``timeout_s``."""
        command = self.command_line(argv, sudo=sudo)
        timeout = timeout_s if timeout_s is not None else self.settings.command_timeout_s
        for attempt in (1, 2):
            self.open()
            try:
                result = self._exec(command, timeout, stdin)
                break
            except (OSError, paramiko.SSHException, EOFError) as exc:
                self.close()
                if attempt == 2:
                    raise TargetUnavailable(
                        f"lost the SSH connection to {self.settings.where} twice "
                        f"running `{command}`: {exc}") from None
        if check and not result.ok:
            raise RemoteCommandFailed(result, self.settings.where)
        return result

    def _exec(self, command: str, timeout_s: float, stdin: bytes | None) -> Result:
        assert self._client is not None
        transport = self._client.get_transport()
        if transport is None:
            raise paramiko.SSHException("no transport")
        channel = transport.open_session(timeout=self.settings.connect_timeout_s)
        try:
            channel.settimeout(timeout_s)
            channel.exec_command(command)
            if stdin is not None:
                channel.sendall(stdin)
            channel.shutdown_write()
            out, err = bytearray(), bytearray()
            deadline = time.monotonic() + timeout_s
            while True:
                while channel.recv_ready():
                    out += channel.recv(65536)
                while channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                # The exit status can arrive before the last of the output (sshd forwards the pipes
                # and the exit separately): done only once the far end also sent EOF and nothing is
                # left to read.
                finished = channel.exit_status_ready() and (channel.eof_received or channel.closed)
                if finished and not channel.recv_ready() and not channel.recv_stderr_ready():
                    break
                if time.monotonic() > deadline:
                    raise TargetUnavailable(
                        f"`{command}` on {self.settings.where} did not finish within "
                        f"{timeout_s:g} s")
                select.select([channel], [], [], 0.02)
            return Result(command, channel.recv_exit_status(), out.decode(errors="replace"),
                          err.decode(errors="replace"))
        except TimeoutError as exc:
            raise TargetUnavailable(
                f"`{command}` on {self.settings.where} timed out: {exc}") from None
        finally:
            channel.close()

    def put(self, data: bytes, path: str, *, mode: str = "0644", sudo: bool | None = None,
            timeout_s: float | None = None) -> None:
        """Write ``data`` to ``path`` atomically: a temporary file in the same directory, then
        ``mv``.

        The data travels on stdin and the paths as positional arguments, so no part of either is
        ever parsed by a shell. The temporary name starts with a dot and does not end in ``.conf``,
        so systemd ignores it even if a daemon-reload happens mid-write.
        """
        directory = str(Path(path).parent)
        tmp = f"{directory}/.{Path(path).name}.spectune-tmp"
        script = 'mkdir -p -- "$1" && cat > "$2" && chmod "$4" -- "$2" && mv -f -- "$2" "$3"'
        self.run(["sh", "-c", script, "sh", directory, tmp, path, mode], stdin=data, sudo=sudo,
                 timeout_s=timeout_s)

    def start(self, argv: Sequence[str], *, env: dict[str, str] | None = None) -> RemoteProcess:
        """Start ``argv`` remotely (never through sudo) and keep it running: its stdin and stdout
        become a line pipe (``RemoteProcess``). Re-opens a dropped connection once, like ``run``."""
        words = ["env", *(f"{k}={v}" for k, v in env.items()), *argv] if env else list(argv)
        command = self.command_line(words, sudo=False)
        for attempt in (1, 2):
            self.open()
            assert self._client is not None
            try:
                transport = self._client.get_transport()
                if transport is None:
                    raise paramiko.SSHException("no transport")
                channel = transport.open_session(timeout=self.settings.connect_timeout_s)
                channel.exec_command(command)
                return RemoteProcess(channel)
            except (OSError, paramiko.SSHException, EOFError) as exc:
                self.close()
                if attempt == 2:
                    raise TargetUnavailable(
                        f"lost the SSH connection to {self.settings.where} twice "
                        f"starting `{argv[0]}`: {exc}") from None
        raise AssertionError("unreachable")


class RemoteProcess:
    """A command running on the far side of an SSH channel, spoken to in lines
    (``tuner.targets.resolver.Pipe``). What it writes to stderr is read and dropped, so a chatty
    import can never fill the channel's window."""

    def __init__(self, channel: paramiko.Channel) -> None:
        self._channel = channel
        self._buffer = bytearray()

    def send(self, line: str) -> None:
        try:
            self._channel.sendall((line + "\n").encode())
        except (paramiko.SSHException, EOFError) as exc:
            raise OSError(str(exc)) from None

    def receive(self, timeout_s: float) -> str | None:
        deadline = time.monotonic() + timeout_s
        channel = self._channel
        while b"\n" not in self._buffer:
            while channel.recv_stderr_ready():
                channel.recv_stderr(65536)
            if channel.recv_ready():
                chunk = channel.recv(65536)
                if not chunk:
                    return None
                self._buffer += chunk
                continue
            if channel.eof_received or channel.closed:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            select.select([channel], [], [], min(remaining, 0.5))
        line, _, rest = self._buffer.partition(b"\n")
        self._buffer = bytearray(rest)
        return line.decode(errors="replace")

    def close(self) -> None:
        # Closing the channel closes the remote stdin: the resolver's read loop ends and it exits.
        self._channel.close()
