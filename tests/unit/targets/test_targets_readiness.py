"""Readiness polling against a tiny in-process HTTP server: backoff, fallback, exits, timeouts."""

from __future__ import annotations

import shlex
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tuner.core.net import ask, free_port, probe
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
        wait_ready(url, timeout_s=30, watch=lambda: ExitInfo(code=2) if time.monotonic() > dead_at
                   else None)
    assert info.value.exit == ExitInfo(code=2)
    assert info.value.connected  # it had answered 503
    assert time.monotonic() - started < 10  # not the 30 s timeout (a busy machine is slow)


def test_timeout_when_nothing_listens() -> None:
    started = time.monotonic()
    with pytest.raises(NotReady) as info:
        wait_ready("http://127.0.0.1:9", timeout_s=0.8, watch=alive,
                   policy=ReadinessPolicy(max_interval_s=0.2))
    assert info.value.exit is None and not info.value.connected
    # the 0.8 s timeout, plus a margin for a busy machine: nothing keeps polling past it
    assert 0.8 <= time.monotonic() - started < 5


class Trickler:
    """A hostile HTTP server on 127.0.0.1: every connection gets ``head`` (at once, or one byte at a
    time when ``slow_head``), then an endless trickle of body bytes ``gap_s`` apart. The gap is far
    below any per-read timeout, so only a deadline on the whole request ends a client's wait."""

    def __init__(self, head: bytes, gap_s: float = 0.1, slow_head: bool = False) -> None:
        self.head = head
        self.gap_s = gap_s
        self.slow_head = slow_head
        self.stop = threading.Event()
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)  # the request
            data = iter(self.head if self.slow_head else b"")
            try:
                if not self.slow_head:
                    conn.sendall(self.head)
            except OSError:
                return
            while not self.stop.is_set():
                byte = next(data, ord("x"))
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return  # the client gave up: what the test wants
                time.sleep(self.gap_s)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


@pytest.mark.fault("hostile_server")
@pytest.mark.parametrize(("head", "slow_head"), [
    # 200 at once, body never completes
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n", False),
    # status line and headers byte by byte
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", True),
    (b"HTTP/1.1 200 OK\r\nX-Slow: ", False),  # a header line that never ends
])
def test_a_probe_of_a_trickling_server_ends_by_its_own_deadline(head: bytes,
                                                                slow_head: bool) -> None:
    server = Trickler(head, gap_s=0.05, slow_head=slow_head)
    try:
        started = time.monotonic()
        status = probe(server.url, "/health_generate", timeout_s=0.5)
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert status is None  # no complete answer within the deadline is no answer
    assert elapsed < 0.5 + 1.5, f"the probe took {elapsed:.2f} s"


def test_ask_says_why_nothing_answered() -> None:
    """What ``spectune bench`` prints before it sends anything: refused is refused, not "nothing
    within 20 s"; a server that never completes its answer is a timeout."""
    assert ask(f"http://127.0.0.1:{free_port()}", "/v1/models", 5.0) == "connection refused"
    server = Trickler(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n", gap_s=0.05)
    try:
        assert ask(server.url, "/v1/models", 0.5) == "no complete answer within 0.5 s"
    finally:
        server.close()


@pytest.mark.fault("hostile_server")
def test_wait_ready_ends_near_its_timeout_against_a_trickling_health_check() -> None:
    # 1 byte per 0.3 s: far below the 2 s per-read timeout, so the old probe waited for all 10^8
    # bytes
    server = Trickler(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n", gap_s=0.3)
    policy = ReadinessPolicy(request_timeout_s=1.0)
    try:
        started = time.monotonic()
        with pytest.raises(NotReady) as info:
            wait_ready(server.url, timeout_s=2.0, watch=alive, policy=policy)
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert not info.value.connected  # a status line alone is not an answer
    assert server.connections >= 2  # it kept polling instead of hanging in the first probe
    # never past the deadline by more than one probe timeout (+ a generous margin for a busy
    # machine)
    assert 2.0 <= elapsed < 2.0 + policy.request_timeout_s + 1.5, f"waited {elapsed:.2f} s"


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
        check_flags(["--tp-size", "--cuda-graph-max-bs-decode", "--speculative-foo"], HELP,
                    where="gpu1")
    assert info.value.failure_class == "invalid-flags"
    assert "--cuda-graph-max-bs-decode, --speculative-foo" in str(info.value)


def test_remote_words_are_quoted_one_by_one() -> None:
    argv = ["systemctl", "restart", "x; touch /tmp/PWNED $(id) `id`\nrm -rf /", "it's"]
    conn = Connection(SSHSettings(host="127.0.0.1"))
    assert shlex.split(conn.command_line(argv)) == argv
    assert shlex.split(conn.command_line(argv, sudo=True)) == ["sudo", "-n", "--", *argv]


@pytest.mark.parametrize(("time_scale", "cap_s"), [(1.0, 0.5), (2.0, 0.25), (25.0, 0.05)])
def test_the_simulator_is_polled_as_often_as_its_time_scale_shrinks_its_start(
        tmp_path: Path, time_scale: float, cap_s: float) -> None:
    """A simulated start-up lasts its modelled time ÷ the time scale: the poll cap shrinks with it,
    not below the first poll's interval; a local server keeps the 0.5 s cap."""
    from tuner.targets.local import LocalTarget
    from tuner.targets.simulated import SimulatedSettings, SimulatedTarget

    target = SimulatedTarget(SimulatedSettings(tmp_path, time_scale=time_scale, port=1))
    assert target.readiness.max_interval_s == pytest.approx(cap_s)
    assert target.readiness.first_interval_s == ReadinessPolicy().first_interval_s
    assert LocalTarget.readiness.max_interval_s == ReadinessPolicy().max_interval_s
