"""Shared pieces of the target tests: the sshd handle, the simulator command, free ports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import spectune_command

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
        # --tp-size 4: the seed profile models 4 GPUs; at TP 1 the 122B weights do not fit one (OOM,
        # as for real).
        argv = [*simulate_prefix(), "--model-path", "Qwen/Qwen3.5-122B-A10B", "--tp-size", "4",
                "--served-model-name", served_name,
                "--host", "127.0.0.1", "--port", str(port)]
        (self.systemd_dir / unit).write_text(
            "[Unit]\nDescription=SGLang (test)\n[Service]\nType=simple\nExecStart=" + " ".join(argv)
            + "\n"
            "[Install]\nWantedBy=multi-user.target\n")
        return unit

    def systemctl(self, *args: str) -> None:
        """Run the systemctl double directly (as the host's admin would, not through the tuner)."""
        env = {**os.environ, "FAKE_SYSTEMD_DIR": str(self.systemd_dir),
               "FAKE_SYSTEMD_STATE": str(self.state_dir)}
        subprocess.run([sys.executable, str(HERE / "fake_systemd.py"), "systemctl", *args], env=env,
                       check=True, timeout=30)

    def sudo_log(self) -> str:
        path = self.state_dir / "sudo.log"
        return path.read_text() if path.exists() else ""


def simulator_missing() -> str | None:
    """Why ``spectune simulate`` cannot serve yet (None when it can): it is built in parallel to the
    targets."""
    done = subprocess.run([*spectune_command(), "simulate", "--", "--help"], capture_output=True,
                          text=True, timeout=60)
    if done.returncode == 0 and "--model-path" in done.stdout:
        return None
    return f"`spectune simulate -- --help` failed: {(done.stderr or done.stdout).strip()[-300:]}"


def simulate_prefix() -> list[str]:
    return [*spectune_command(), "simulate", "--time-scale", str(TIME_SCALE), "--seed", "1", "--"]

