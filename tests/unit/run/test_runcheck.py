"""Judging a phase's run: crashed, hung, a burst of server errors, or measured."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tuner.run import runcheck
from tuner.run.runcheck import ServerState, judge, needs_check, server_state
from tuner.targets.base import FailureCause
from tuner.targets.classify import ExitInfo

OOM_LOG = ("[2026-12-02 10:01:31] The server is fired up and ready to roll!\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")


def phase(completed: int, failed: int, **errors: int) -> dict[str, object]:
    return {"completed": completed, "failed": failed, "errors": errors}


def test_an_exited_server_crashed_under_load_with_its_exit_phase_and_cause() -> None:
    failure = judge(phase(20, 40, connect=40), 64, ServerState(ExitInfo(code=1), False, None),
                    OOM_LOG)
    assert failure is not None and failure.failure_class == "crashed-under-load"
    assert failure.cause is FailureCause.DECODE_OOM
    assert failure.evidence["exit"] == "exited with code 1" \
           and failure.evidence["concurrency"] == 64
    assert "OutOfMemoryError" in failure.message and "C=64" in failure.message


def test_an_unanswered_health_check_is_a_hang() -> None:
    failure = judge(phase(8, 56, stall=56), 64, ServerState(None, True, None), "")
    assert failure is not None \
           and (failure.failure_class, failure.cause) == ("hung", FailureCause.HANG)


def test_a_healthy_server_with_a_burst_of_5xx_failed_the_run_and_a_few_errors_do_not() -> None:
    burst = judge(phase(100, 28, http_5xx=28), 64, ServerState(None, True, 200), "")
    assert burst is not None and burst.cause is FailureCause.SERVER_ERRORS
    assert judge(phase(127, 1, http_5xx=1), 64, ServerState(None, True, 200), "") is None
    # our own bug
    assert judge(phase(100, 28, client=28), 64, ServerState(None, True, 200), "") is None


def test_only_a_suspicious_phase_is_checked() -> None:
    assert not needs_check(phase(128, 0))
    assert needs_check(phase(128, 1)) and needs_check(phase(0, 0))


def test_server_state_over_real_sockets() -> None:
    class Slow(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        state = server_state(f"http://127.0.0.1:{server.server_address[1]}", lambda: None)
        assert state.listening and state.health == 503
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gone = server_state(f"http://127.0.0.1:{port}", lambda: None)
    assert not gone.listening
    assert runcheck.judge(phase(3, 10, connect=10), 1, gone, "") is not None
