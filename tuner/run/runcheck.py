"""Did the server survive the phase? A crash, a hang or a burst of server errors under load is the
configuration's fault, not the machine's.

After a phase in which requests failed (or none completed), the measurer asks three things, in
order:

1. has the server process / unit exited (the target's ``exit_info``)? → ``crashed-under-load``;
2. does its port still accept connections? Refused → ``crashed-under-load`` (it stopped listening);
3. does ``/health_generate`` (else ``/health``) answer 200 within ``HEALTH_TIMEOUT_S``? No →
   ``hung``.

A server that is alive and healthy but failed at least ``RUN_ERROR_SHARE`` of the phase's requests
with server-side errors (5xx, reset or refused connections, error events, stalls) is
``crashed-under-load`` too (cause ``server-errors``): such a phase measured a failing server, and
its partial figures must never rank. Fewer errors leave the phase measured; the study's
``error_rate`` constraint judges those.

The machine's own trouble is not judged here: a phase the simulator could not keep its schedule for
(``simulator-overloaded``), storage outages and interrupts keep their own paths and are queued
again.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from objectives.scoring import PhaseFigures, figure
from tuner.core.net import probe
from tuner.targets.base import FailureCause
from tuner.targets.classify import ExitInfo, cause_of, telling_line

#: A healthy server that failed this share of a phase's requests with server-side errors still
#: failed the run.
RUN_ERROR_SHARE: Final = 0.10
#: How long the health check may take: SGLang's own health check gives a generation 20 s (its
#: SGLANG_HEALTH_CHECK_TIMEOUT); an idle server answers in milliseconds. A simulator running X times
#: faster than real gets a X times shorter wait, but never under ``MIN_HEALTH_TIMEOUT_S``.
HEALTH_TIMEOUT_S: Final = 10.0
MIN_HEALTH_TIMEOUT_S: Final = 2.0
CONNECT_TIMEOUT_S: Final = 3.0
#: How long a server that stopped listening is given to report its exit status.
EXIT_WAIT_S: Final = 3.0
HEALTH_PATHS: Final = ("/health_generate", "/health")
#: Request failures the server is to blame for (objectives.records.ErrorKind values); a client-side
#: bug is not.
SERVER_SIDE: Final = frozenset({"connect", "timeout", "stall", "http_5xx", "disconnect",
                                "malformed", "server_error"})


@dataclass(frozen=True)
class ServerState:
    """What the measurer found after the phase."""

    exit: ExitInfo | None  # the process / unit has ended (None: alive, or the target cannot tell)
    listening: bool  # its port accepts connections
    health: int | None  # the health check's status (None: no answer in time)


@dataclass(frozen=True)
class RunFailure:
    failure_class: str  # crashed-under-load | hung
    cause: FailureCause
    message: str
    evidence: dict[str, object]


def needs_check(metrics: PhaseFigures) -> bool:
    """Whether a phase's result is suspicious enough to ask the server how it is."""
    return bool(metrics.get("failed")) or not metrics.get("completed")


def health_timeout(time_scale: float) -> float:
    return max(MIN_HEALTH_TIMEOUT_S, HEALTH_TIMEOUT_S / max(time_scale, 1.0))


def server_state(base_url: str, exit_info: Callable[[], ExitInfo | None],
                 timeout_s: float = HEALTH_TIMEOUT_S) -> ServerState:
    exit = exit_info()
    if exit is not None:
        return ServerState(exit, listening=False, health=None)
    listening = _listening(base_url)
    health = None
    if listening:
        for path in HEALTH_PATHS:
            health = probe(base_url, path, timeout_s)
            if health != 404:
                break
    # The process may have died while we asked, or be on its way out (a closed port before the exit
    # status).
    exit = exit_info()
    deadline = time.monotonic() + (EXIT_WAIT_S if not listening else 0.0)
    while exit is None and time.monotonic() < deadline:
        time.sleep(0.1)
        exit = exit_info()
    return ServerState(exit, listening, health)


def judge(metrics: PhaseFigures, concurrency: int, state: ServerState,
          log_tail: str) -> RunFailure | None:
    """The run failure this phase shows, or None (the phase stands as measured)."""
    stored = metrics.get("errors")
    errors = {str(k): int(v) for k, v in stored.items()} if isinstance(stored, Mapping) else {}
    completed = int(figure(metrics, "completed") or 0)
    failed = int(figure(metrics, "failed") or 0)
    server_errors = sum(n for kind, n in errors.items() if kind in SERVER_SIDE)
    evidence: dict[str, object] = {"phase": f"c{concurrency}", "concurrency": concurrency,
                                "completed": completed, "failed": failed, "errors": errors,
                                "exit": state.exit.describe() if state.exit is not None else None,
                                "health": state.health}
    where = f"at C={concurrency} after {completed} requests completed and {failed} failed"
    if state.exit is not None or not state.listening:
        how = state.exit.describe() if state.exit is not None else "stopped accepting connections"
        cause = cause_of("crashed-under-load", log_tail) or FailureCause.CRASH
        return RunFailure("crashed-under-load", cause,
                          f"the server {how} {where}{_last_line(log_tail)}", evidence)
    if state.health != 200:
        answer = f"answered {state.health}" if state.health is not None else "no answer in time"
        return RunFailure("hung", FailureCause.HANG,
                          f"the server stopped answering {where}: health check "
                          f"{answer}{_last_line(log_tail)}",
                          evidence)
    total = completed + failed
    if total and server_errors / total >= RUN_ERROR_SHARE:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(errors.items())
                          if kind in SERVER_SIDE)
        return RunFailure("crashed-under-load", FailureCause.SERVER_ERRORS,
                          f"the server failed {server_errors} of {total} requests "
                          f"{where.split(' after')[0]} ({kinds}; {RUN_ERROR_SHARE:.0%} or more "
                          "fails the run)", evidence)
    return None


def _listening(base_url: str) -> bool:
    parts = urlsplit(base_url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return True
    except TimeoutError:
        return True  # a full accept queue is a hang, not a crash: the health check decides
    except OSError:
        return False


def _last_line(log_tail: str) -> str:
    """``; log: <the most telling line>``: an out-of-memory or traceback line if there is one, else
    the last."""
    telling = telling_line(log_tail)
    return f"; log: {telling}" if telling else ""
