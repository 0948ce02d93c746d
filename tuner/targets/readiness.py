"""Wait until a freshly started server is really ready, while watching that it is still alive.

Ready means ``GET /health_generate`` answers 200 (SGLang runs a one-token generation for it), or
``/health`` on a server without that route — never ``/v1/models``, which answers before warmup
(reference notes §0.5). Polls back off from 50 ms to 0.5 s: a poll of a server that is still
starting costs a refused connection or a 503, and the cap bounds how late we notice readiness (the
benchmark may start < 1 s after the server is ready). Between polls ``watch`` is asked whether the
process/unit is still alive, so a crash ends the wait at once instead of after the startup timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tuner.core.faults import fault_point
from tuner.core.net import probe
from tuner.targets.classify import ExitInfo

READY_PATHS = ("/health_generate", "/health")


@dataclass(frozen=True)
class ReadinessPolicy:
    first_interval_s: float = 0.05
    max_interval_s: float = 0.5
    factor: float = 1.5
    request_timeout_s: float = 2.0


@dataclass(frozen=True)
class Ready:
    path: str  # the endpoint that answered 200
    elapsed_s: float
    polls: int


class NotReady(Exception):
    """The wait ended without a 200: the server exited (``exit`` set) or the timeout passed."""

    def __init__(self, message: str, *, exit: ExitInfo | None = None, connected: bool = False,
                 last_error: str = "") -> None:
        self.exit = exit
        self.connected = connected  # whether any HTTP answer (e.g. 503) ever came back
        self.last_error = last_error
        super().__init__(message)


def wait_ready(base_url: str, *, timeout_s: float, watch: Callable[[], ExitInfo | None],
               policy: ReadinessPolicy | None = None) -> Ready:
    """Return once the server answers 200; raise ``NotReady`` when ``watch`` reports an exit or time
    runs out.

    ``watch`` returns None while the server process/unit is alive, else how it ended; it is called
    between polls (and may rate-limit itself when it is expensive, e.g. over SSH). Each poll is
    bounded as a whole (not per socket read), so a server that answers byte by byte cannot hold the
    wait past ``timeout_s`` by more than one poll's timeout.
    """
    policy = policy or ReadinessPolicy()
    start = time.monotonic()
    deadline = start + timeout_s
    interval = policy.first_interval_s
    paths = list(READY_PATHS)
    polls = 0
    connected = False
    last_error = "no answer yet"
    while True:
        fault_point("readiness")
        exited = watch()
        if exited is not None:
            raise NotReady(f"server {exited.describe()} before it was ready", exit=exited,
                           connected=connected)
        remaining = deadline - time.monotonic()
        # probe() bounds the whole request, so this poll ends by the deadline (+ 50 ms for a last
        # look).
        status = probe(base_url, paths[0], min(policy.request_timeout_s, max(remaining, 0.05)))
        polls += 1
        if status == 200:
            return Ready(paths[0], time.monotonic() - start, polls)
        if status is not None:
            connected = True
            last_error = f"{paths[0]} answered {status}"
            if status == 404 and len(paths) > 1:
                paths.pop(0)  # an older server without /health_generate: use /health from now on
                continue
        else:
            last_error = f"no answer from {base_url}{paths[0]}"
        if time.monotonic() >= deadline:
            raise NotReady(f"not ready after {timeout_s:g} s ({last_error})", connected=connected,
                           last_error=last_error)
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))
        interval = min(interval * policy.factor, policy.max_interval_s)
