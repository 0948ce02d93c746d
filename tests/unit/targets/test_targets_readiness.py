"""Readiness polling against a tiny in-process HTTP server: backoff, fallback, exits, timeouts."""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tuner.targets.base import DeployFailed
from tuner.targets.classify import ExitInfo
from tuner.targets.preflight import check_flags, options_in_help
from tuner.targets.readiness import NotReady, ReadinessPolicy, wait_ready
from tuner.targets.ssh import Connection, SSHSettings


class _State:
    ready_at = float("inf")
    has_health_generate = True
    paths: list[str]

    def __init__(self) -> None:
        self.paths = []


@pytest.fixture()
def server() -> Iterator[tuple[str, _State]]:
    state = _State()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.paths.append(self.path)
            if self.path == "/health_generate" and not state.has_health_generate:
                code = 404
            elif self.path in ("/health_generate", "/health"):
                code = 200 if time.monotonic() >= state.ready_at else 503
            else:
                code = 200  # /v1/models would say "ready" far too early: it must never be asked
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", state
    httpd.shutdown()
    httpd.server_close()


def alive() -> None:
    return None


def test_returns_soon_after_the_server_turns_ready(server: tuple[str, _State]) -> None:
    url, state = server
    state.ready_at = time.monotonic() + 1.2
    ready = wait_ready(url, timeout_s=10, watch=alive)
    late = time.monotonic() - state.ready_at
    assert 0 <= late < 0.6, f"noticed readiness {late:.3f} s late"
    assert ready.path == "/health_generate" and ready.polls >= 5
    assert set(state.paths) == {"/health_generate"}


def test_falls_back_to_health_without_health_generate(server: tuple[str, _State]) -> None:
    url, state = server
    state.has_health_generate = False
    state.ready_at = 0
    ready = wait_ready(url, timeout_s=5, watch=alive)
    assert ready.path == "/health"
    assert state.paths == ["/health_generate", "/health"]


def test_an_exit_ends_the_wait_at_once(server: tuple[str, _State]) -> None:
    url, _ = server
    dead_at = time.monotonic() + 0.5
    started = time.monotonic()
    with pytest.raises(NotReady) as info:
        wait_ready(url, timeout_s=30, watch=lambda: ExitInfo(code=2) if time.monotonic() > dead_at else None)
    assert info.value.exit == ExitInfo(code=2)
    assert info.value.connected  # it had answered 503
    assert time.monotonic() - started < 1.5


def test_timeout_when_nothing_listens() -> None:
    started = time.monotonic()
    with pytest.raises(NotReady) as info:
        wait_ready("http://127.0.0.1:9", timeout_s=0.8, watch=alive, policy=ReadinessPolicy(max_interval_s=0.2))
    assert info.value.exit is None and not info.value.connected
    assert 0.8 <= time.monotonic() - started < 1.5


HELP = """usage: launch_server.py [-h] --model-path MODEL_PATH [--tp-size TP_SIZE]
options:
  --speculative-num-steps SPECULATIVE_NUM_STEPS
                        The number of steps. See --speculative-eagle-topk.
  --enable-metrics, --no-enable-metrics
"""


def test_options_are_read_from_help() -> None:
    found = options_in_help(HELP)
    assert {"--model-path", "--tp-size", "--speculative-num-steps", "--speculative-eagle-topk",
            "--enable-metrics", "--no-enable-metrics"} <= found
    check_flags(["--tp-size", "--no-enable-metrics"], HELP, where="here")
    with pytest.raises(DeployFailed) as info:
        check_flags(["--tp-size", "--cuda-graph-max-bs-decode", "--speculative-foo"], HELP, where="gpu1")
    assert info.value.failure_class == "invalid-flags"
    assert "--cuda-graph-max-bs-decode, --speculative-foo" in str(info.value)


def test_remote_words_are_quoted_one_by_one() -> None:
    argv = ["systemctl", "restart", "x; touch /tmp/PWNED $(id) `id`\nrm -rf /", "it's"]
    conn = Connection(SSHSettings(host="127.0.0.1"))
    assert shlex.split(conn.command_line(argv)) == argv
    assert shlex.split(conn.command_line(argv, sudo=True)) == ["sudo", "-n", "--", *argv]
