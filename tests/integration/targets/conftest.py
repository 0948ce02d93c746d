"""A real OpenSSH server on 127.0.0.1 with throw-away keys, whose login has systemd test doubles on its PATH.

``sshd`` runs as the current user (root in CI) from a temp dir: its own host key, an authorized_keys file with
a fresh user key, ``StrictModes no`` and ``UsePAM no`` so nothing of the machine's SSH setup is used or changed.
``SetEnv`` puts ``systemctl``/``journalctl``/``sudo`` doubles (fake_systemd.py) first on the login's PATH and
tells them where the fake ``/etc/systemd/system`` is.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import REPO, require_binary, spectune_command

HERE = Path(__file__).resolve().parent
#: Fast simulator startups: the seed's ~75 s startup takes well under a second.
TIME_SCALE = 150.0


@dataclass(frozen=True)
class SshServer:
    host: str
    port: int
    user: str
    key_file: Path
    known_hosts: Path
    host_key_pub: Path
    systemd_dir: Path
    state_dir: Path
    pid: int

    def connection_pids(self) -> list[int]:
        """The per-connection sshd processes (children of the listener)."""
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.pid:
                pids.append(int(stat.parent.name))
        return pids

    def drop_connections(self) -> int:
        """Kill every open SSH connection (the listener keeps running), as a network drop would."""
        pids = self.connection_pids()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        return len(pids)

    def add_unit(self, port: int, *, served_name: str = "original") -> str:
        """A user's unit file running the simulator with its own ("original") configuration."""
        unit = f"sim-{uuid.uuid4().hex[:8]}.service"
        argv = [*simulate_prefix(), "--model-path", "Qwen/Qwen3.5-122B-A10B", "--served-model-name", served_name,
                "--host", "127.0.0.1", "--port", str(port)]
        (self.systemd_dir / unit).write_text(
            "[Unit]\nDescription=SGLang (test)\n[Service]\nType=simple\nExecStart=" + " ".join(argv) + "\n"
            "[Install]\nWantedBy=multi-user.target\n")
        return unit

    def sudo_log(self) -> str:
        path = self.state_dir / "sudo.log"
        return path.read_text() if path.exists() else ""


def simulate_prefix() -> list[str]:
    return [*spectune_command(), "simulate", "--time-scale", str(TIME_SCALE), "--seed", "1", "--"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> None:
    keygen = require_binary("ssh-keygen")
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "spectune-test", "-f", str(path)], check=True)


def _wrappers(bin_dir: Path) -> None:
    bin_dir.mkdir()
    for tool in ("systemctl", "journalctl", "sudo"):
        wrapper = bin_dir / tool
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "fake_systemd.py"} {tool} "$@"\n')
        wrapper.chmod(0o755)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    binary = require_binary("sshd", "/usr/sbin/sshd")
    root = tmp_path_factory.mktemp("sshd")
    for name in ("host_key", "user_key"):
        _keygen(root / name)
    (root / "authorized_keys").write_text((root / "user_key.pub").read_text())
    systemd_dir, state_dir = root / "systemd", root / "state"
    systemd_dir.mkdir()
    state_dir.mkdir()
    _wrappers(root / "bin")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory; running as root needs it
    port = free_port()
    user = os.environ.get("USER") or subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    path = f"{root / 'bin'}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    config = root / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {root / 'host_key'}", f"PidFile {root / 'sshd.pid'}",
        f"AuthorizedKeysFile {root / 'authorized_keys'}", "StrictModes no", "UsePAM no", "PubkeyAuthentication yes",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password",
        f"AllowUsers {user}", "MaxStartups 50", "LogLevel ERROR",
        f"SetEnv PATH={path} FAKE_SYSTEMD_DIR={systemd_dir} FAKE_SYSTEMD_STATE={state_dir} PYTHONPATH={REPO}",
    ]) + "\n")
    proc = subprocess.Popen([binary, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=open(root / "sshd.log", "wb"))  # noqa: SIM115
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"sshd did not start: {(root / 'sshd.log').read_text()[-2000:]}")
            time.sleep(0.02)
    host_key_pub = root / "host_key.pub"
    known_hosts = root / "known_hosts"
    key_type, key_b64 = host_key_pub.read_text().split()[:2]
    known_hosts.write_text(f"[127.0.0.1]:{port} {key_type} {key_b64}\n")
    server = SshServer("127.0.0.1", port, user, root / "user_key", known_hosts, host_key_pub, systemd_dir, state_dir,
                       proc.pid)
    yield server
    proc.terminate()
    proc.wait(timeout=10)
    # Stop every fake unit the tests left running.
    for status in state_dir.glob("*.status.json"):
        subprocess.run([str(root / "bin" / "systemctl"), "stop", status.name.removesuffix(".status.json")],
                       env={**os.environ, "FAKE_SYSTEMD_DIR": str(systemd_dir), "FAKE_SYSTEMD_STATE": str(state_dir)},
                       check=False, timeout=30)
