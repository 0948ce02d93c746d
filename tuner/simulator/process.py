"""Start ``spectune simulate`` as a subprocess on 127.0.0.1 and wait until it is ready (for tests and tools).

The log goes to a file, never a pipe: a pipe nobody reads fills up and stalls the server mid-benchmark.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"


class SimulatorExited(RuntimeError):
    """The simulator process ended (or never became ready) while we waited for it."""

    def __init__(self, message: str, returncode: int | None, log: str) -> None:
        super().__init__(f"{message}\n{log[-3000:]}")
        self.returncode = returncode
        self.log = log


@dataclass(frozen=True)
class RunningSimulator:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    started: float  # time.monotonic() just before the process was started

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def simulate_command(args: Sequence[str], *, profile: str | None = None, time_scale: float = 1.0,
                     seed: int = 0) -> list[str]:
    command = [sys.executable, "-m", "tuner.cli", "simulate"]
    if profile is not None:
        command += ["--profile", profile]
    return [*command, "--time-scale", repr(float(time_scale)), "--seed", str(seed), "--", *args]


def http_status(url: str, timeout_s: float = 5.0) -> int | None:
    """Status of ``GET url``; None when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


def _stop(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def running_simulator(args: Sequence[str], *, profile: str | None = None, time_scale: float = 100.0,
                      seed: int = 0, log_path: Path | None = None, ready_timeout_s: float = 60.0,
                      port: int | None = None, wait_ready: bool = True) -> Iterator[RunningSimulator]:
    """A simulator on 127.0.0.1 for the block's duration, ready (``/health_generate`` 200) unless
    ``wait_ready`` is false; raises ``SimulatorExited`` if it exits or is not ready within the timeout."""
    argv = list(args)
    if "--port" in argv:
        port = int(argv[argv.index("--port") + 1])
    else:
        port = port or free_port()
        argv += ["--port", str(port)]
    if "--host" not in argv:
        argv += ["--host", HOST]
    with contextlib.ExitStack() as stack:
        if log_path is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="spectune-sim-"))
            log_path = Path(folder) / "simulator.log"
        log_file = stack.enter_context(log_path.open("wb"))
        started = time.monotonic()
        process = subprocess.Popen(simulate_command(argv, profile=profile, time_scale=time_scale, seed=seed),
                                   stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        stack.callback(_stop, process)
        sim = RunningSimulator(url=f"http://{HOST}:{port}", port=port, process=process, log_path=log_path,
                               started=started)
        if wait_ready:
            _wait_ready(sim, ready_timeout_s)
        yield sim


def _wait_ready(sim: RunningSimulator, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        code = sim.process.poll()
        if code is not None:
            raise SimulatorExited(f"the simulator exited with {code} before it was ready", code, sim.log())
        if http_status(f"{sim.url}/health_generate", timeout_s=5.0) == 200:
            return
        if time.monotonic() > deadline:
            raise SimulatorExited(f"the simulator was not ready within {timeout_s:g} s", None, sim.log())
        time.sleep(0.01)
