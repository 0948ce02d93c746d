"""Start ``spectune simulate`` as a subprocess on 127.0.0.1 and wait until it is ready (for tests
and tools).

The log goes to a file, never a pipe: a pipe nobody reads fills up and stalls the server
mid-benchmark.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tuner.core.net import free_port, probe
from tuner.simulator.command import simulator_command

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


def http_status(url: str, timeout_s: float = 5.0) -> int | None:
    """Status of ``GET url``; None when nothing answered (the readiness probe the targets use)."""
    parts = urlsplit(url)
    return probe(f"{parts.scheme}://{parts.netloc}", parts.path or "/", timeout_s)


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
                      port: int | None = None,
                      wait_ready: bool = True) -> Iterator[RunningSimulator]:
    """A simulator on 127.0.0.1 for the block's duration, ready (``/health_generate`` 200) unless
    ``wait_ready`` is false; raises ``SimulatorExited`` if it exits or is not ready within the
    timeout."""
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
        process = subprocess.Popen([*simulator_command(profile, time_scale, seed), *argv],
                                   stdout=log_file, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        stack.callback(_stop, process)
        sim = RunningSimulator(url=f"http://{HOST}:{port}", port=port, process=process,
                               log_path=log_path, started=started)
        if wait_ready:
            _wait_ready(sim, ready_timeout_s)
        yield sim


def _wait_ready(sim: RunningSimulator, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        code = sim.process.poll()
        if code is not None:
            raise SimulatorExited(f"the simulator exited with {code} before it was ready", code,
                                  sim.log())
        if http_status(f"{sim.url}/health_generate", timeout_s=5.0) == 200:
            return
        if time.monotonic() > deadline:
            raise SimulatorExited(f"the simulator was not ready within {timeout_s:g} s", None,
                                  sim.log())
        time.sleep(0.01)
