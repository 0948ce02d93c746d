"""The load generator against servers that misbehave in every way we know: every failure ends up in
the phase result by kind, and every phase ends in bounded time."""

from __future__ import annotations

import socket
import time

import pytest

from objectives.runner import run_benchmark, run_phase
from objectives.spec import BenchmarkSpec, PhaseSpec, WorkloadSpec
from tests.integration.objectives.fake_sglang import FakeServer, Mode, Script, fake_server

pytestmark = pytest.mark.timeout(30)  # a hang is a failure, not a stuck CI job


def bench(url: str, *phases: PhaseSpec, **workload: object):
    spec = BenchmarkSpec(workload=WorkloadSpec(**workload), phases=phases)  # type: ignore[arg-type]
    return run_benchmark(url, spec)


BROKEN = [Mode.OK, Mode.HTTP_500, Mode.HTTP_400, Mode.BAD_JSON, Mode.ERROR_EVENT, Mode.RESET,
          Mode.TRUNCATED, Mode.NO_USAGE, Mode.BAD_USAGE]


@pytest.mark.parametrize("api", ["chat", "completions", "generate"])
def test_every_kind_of_broken_response_is_recorded_as_data(api: str) -> None:
    with fake_server(modes=BROKEN) as server:
        result = bench(server.url, PhaseSpec(1, requests=len(BROKEN), warmup=0), api=api)
    phase = result.phases[0]
    assert phase.errors == {"bad_usage": 1, "disconnect": 2, "http_4xx": 1, "http_5xx": 1,
                            "malformed": 1, "missing_usage": 1, "server_error": 1}
    assert (phase.completed, phase.failed, phase.cancelled) == (1, 8, 0)
    assert phase.error_rate == pytest.approx(8 / 9)
    by_kind = {str(r.error_kind): r for r in phase.records if r.error_kind is not None}
    assert "HTTP 500" in (by_kind["http_5xx"].error_message or "")
    assert "scheduler crashed" in (by_kind["server_error"].error_message or "")
    assert by_kind["http_5xx"].http_status == 500
    assert phase.output_tokens == 28  # only the good request's tokens: 1 + 9 × 3


def test_a_stalled_stream_is_cut_by_the_stall_timeout() -> None:
    started = time.monotonic()
    with fake_server(modes=[Mode.STALL]) as server:
        result = bench(server.url, PhaseSpec(2, requests=2, warmup=0), stall_timeout_s=0.3)
    assert result.phases[0].errors == {"stall": 2}
    assert time.monotonic() - started < 5


def test_a_slow_request_is_cut_by_the_request_timeout() -> None:
    with fake_server(chunk_delay_s=0.1) as server:
        result = bench(server.url, PhaseSpec(1, requests=2, warmup=0), request_timeout_s=0.3)
    phase = result.phases[0]
    assert phase.errors == {"timeout": 2}
    assert all(0.25 < r.end_s < 1.0 for r in phase.records)


def test_the_phase_deadline_ends_a_phase_of_stuck_requests() -> None:
    started = time.monotonic()
    with fake_server(modes=[Mode.STALL]) as server:
        result = bench(server.url, PhaseSpec(3, requests=10, warmup=0, deadline_s=0.5))
    phase = result.phases[0]
    assert phase.stopped_by == "deadline"
    assert phase.errors == {"deadline": 3}
    assert time.monotonic() - started < 5


def test_no_server_at_all_gives_connect_errors_and_stops_early() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    result = bench(f"http://127.0.0.1:{port}", PhaseSpec(2, duration_s=30, warmup=1))
    phase = result.phases[0]
    assert phase.stopped_by == "failures"
    assert set(phase.errors) == {"connect"} and phase.warmup_failed == 1
    assert phase.aggregate_tok_s == 0
    assert time.monotonic() - started < 10


def test_totals_without_per_chunk_usage_are_spread_and_in_flight_requests_drain() -> None:
    with fake_server(modes=[Mode.FINAL_USAGE_ONLY]) as server:
        result = bench(server.url, PhaseSpec(4, requests=12, warmup=0))
    phase = result.phases[0]
    assert not phase.tokens_exact
    assert phase.failed == 0 and phase.completed >= 12
    assert all(r.output_tokens == 28 for r in phase.records if r.ok)
    # drained requests finish after the window: only their in-window tokens count
    assert phase.output_tokens <= 28 * (phase.completed + phase.cancelled)


def test_duration_phase_keeps_concurrency_and_cancels_at_the_end() -> None:
    with fake_server() as server:
        result = bench(server.url, PhaseSpec(4, duration_s=0.6, warmup=2))
    phase = result.phases[0]
    assert phase.stopped_by == "duration"
    assert phase.duration_s == pytest.approx(0.6, abs=0.1)
    assert phase.cancelled == 4 and phase.failed == 0
    assert phase.achieved_concurrency == pytest.approx(4, rel=0.1)
    assert phase.aggregate_tok_s == pytest.approx(phase.output_tokens / phase.duration_s)


def test_confidence_target_stops_a_steady_phase_early() -> None:
    with fake_server() as server:
        result = bench(server.url,
                       PhaseSpec(4, requests=100_000, warmup=0, ci_target=0.2, deadline_s=20))
    phase = result.phases[0]
    assert phase.stopped_by == "ci"
    assert phase.ci_half_width is not None and phase.ci_half_width <= 0.2
    assert phase.duration_s < 10


def test_accept_length_from_counter_deltas_or_from_server_info_after_a_flush() -> None:
    with FakeServer(Script()).running() as server:
        result = bench(server.url, PhaseSpec(1, requests=3), PhaseSpec(2, requests=4))
        assert server.script.flushes == 0
    assert [p.accept_length_source for p in result.phases] == ["metrics", "metrics"]
    assert result.phases[0].accept_length == pytest.approx(28 / 9)  # 28 tokens per 9 verify calls
    assert result.phases[0].tokens_per_chunk == pytest.approx(3.0)
    with FakeServer(Script(metrics=False, accept_length=2.5)).running() as server:
        result = bench(server.url, PhaseSpec(1, requests=2), PhaseSpec(2, requests=2))
        assert server.script.flushes == 2
    assert [(p.accept_length, p.accept_length_source)
            for p in result.phases] == [(2.5, "server_info")] * 2


def test_warmup_is_separate_and_the_model_is_discovered() -> None:
    with FakeServer(Script(modes=[Mode.HTTP_500, Mode.OK, Mode.OK, Mode.OK])).running() as server:
        result = bench(server.url, PhaseSpec(1, requests=3, warmup=1))
        bodies = server.script.bodies
    phase = result.phases[0]
    assert phase.warmup_failed == 1 and phase.failed == 0 and phase.completed == 3
    assert result.model == "fake-model" and all(b["model"] == "fake-model" for b in bodies)


def test_a_single_phase_sends_what_the_whole_benchmark_sends_in_that_phase() -> None:
    spec = BenchmarkSpec(workload=WorkloadSpec(dataset="synthetic", input_tokens=32),
                         phases=(PhaseSpec(1, requests=2, warmup=0),
                                 PhaseSpec(2, requests=3, warmup=0)))
    with fake_server() as server:
        run_benchmark(server.url, spec)
        whole = [b["messages"] for b in server.script.bodies[2:]]
        server.script.bodies.clear()
        phase = run_phase(server.url, spec, 1)
        alone = [b["messages"] for b in server.script.bodies]
    assert phase.label == "C=2" and phase.completed == 3
    assert alone[:3] == whole[:3]
    with pytest.raises(IndexError):
        run_phase(server.url, spec, 2)
