"""A real OpenSSH server on 127.0.0.1 with throw-away keys, whose login has systemd test doubles on
its PATH.

``sshd`` runs as the current user (root in CI) from a temp dir: its own host key, an authorized_keys
file with a fresh user key, ``StrictModes no`` and ``UsePAM no`` so nothing of the machine's SSH
setup is used or changed. ``SetEnv`` puts ``systemctl``/``journalctl``/``sudo`` doubles
(fake_systemd.py) first on the login's PATH and tells them where the fake ``/etc/systemd/system``
is.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import require_binary
from tests.integration.targets.harness import HERE, SshServer, simulator_missing
from tuner.core.net import free_port


def _keygen(path: Path) -> None:
    keygen = require_binary("ssh-keygen")
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "spectune-test", "-f",
                    str(path)], check=True)


def _wrappers(bin_dir: Path) -> None:
    bin_dir.mkdir()
    for tool in ("systemctl", "journalctl", "sudo"):
        wrapper = bin_dir / tool
        wrapper.write_text(
            f'#!/bin/sh\nexec {sys.executable} {HERE / "fake_systemd.py"} {tool} "$@"\n')
        wrapper.chmod(0o755)


@pytest.fixture(scope="session")
def simulator() -> None:
    """The SGLang simulator every server in these tests is. Until ``tuner/simulator`` serves, the
    tests that start servers skip with the reason (under CI=true they fail: the simulator is part of
    the product)."""
    reason = simulator_missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


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
        # sshd's privilege-separation directory; running as root needs it
        Path("/run/sshd").mkdir(exist_ok=True)
    port = free_port()
    user = os.environ.get("USER") or subprocess.run(
        ["id", "-un"], capture_output=True, text=True).stdout.strip()
    path = f"{root / 'bin'}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    config = root / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {root / 'host_key'}",
        f"PidFile {root / 'sshd.pid'}",
        f"AuthorizedKeysFile {root / 'authorized_keys'}", "StrictModes no", "UsePAM no",
        "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        f"AllowUsers {user}", "MaxStartups 50", "LogLevel ERROR",
        # HOME points at an empty dir so the login shell sources no ~/.bashrc of this machine (slow,
        # and not hermetic); PATH puts the doubles first.
        f"SetEnv HOME={root} PATH={path} FAKE_SYSTEMD_DIR={systemd_dir} "
        f"FAKE_SYSTEMD_STATE={state_dir}",
    ]) + "\n")
    proc = subprocess.Popen([binary, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=open(root / "sshd.log", "wb"))  # noqa: SIM115
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
    server = SshServer("127.0.0.1", port, user, root / "user_key", known_hosts, host_key_pub,
                       systemd_dir, state_dir, proc.pid)
    yield server
    proc.terminate()
    proc.wait(timeout=10)
    # Stop every fake unit the tests left running.
    for status in state_dir.glob("*.status.json"):
        subprocess.run([str(root / "bin" / "systemctl"), "stop",
                        status.name.removesuffix(".status.json")],
                       env={**os.environ, "FAKE_SYSTEMD_DIR": str(systemd_dir),
                            "FAKE_SYSTEMD_STATE": str(state_dir)},
                       check=False, timeout=30)
