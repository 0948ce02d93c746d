"""The load generator against a server that lies about token counts and misbehaves at the byte
level: every answer ends as an error-as-data record of the right kind, in bounded memory and bounded
time, and nothing raises."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator

import pytest

from objectives.results import PhaseResult
from objectives.runner import run_benchmark
from objectives.spec import BenchmarkSpec, PhaseSpec, WorkloadSpec
from objectives.usage import token_limit
from tests.integration.objectives.hostile_server import BEHAVIOURS, HostileServer, hostile_server

pytestmark = [pytest.mark.timeout(60), pytest.mark.fault("hostile_server")]

MAX_TOKENS = 16
REQUEST_TIMEOUT_S = 1.5
# Before the checks, one lying chunk (2·10⁸ tokens) took 6.3 GB; the client needs ~2 MiB here (4 MiB
# lines).
MEMORY_BUDGET_BYTES = 16 * 1024 * 1024

EXPECTED = {
    "huge_usage": "bad_usage",
    "huge_usage_1e30": "bad_usage",
    "negative_usage": "bad_usage",
    "string_usage": "bad_usage",
    "float_usage": "bad_usage",
    "nan_usage": "bad_usage",
    "inf_usage": "bad_usage",
    "bool_usage": "bad_usage",
    "negative_prompt_tokens": "bad_usage",
    "nan_prompt_tokens": "bad_usage",
    "over_max_tokens": "bad_usage",
    "too_many_chunks": "bad_usage",
    "truncated": "disconnect",
    "truncated_mid_event": "disconnect",
    "endless": "timeout",  # events keep coming: only a per-request (not per-read) timeout ends it
    "slow_headers": "timeout",
    "garbage_json": "malformed",
    "json_array": "malformed",
    "html_200": "malformed",
    "bad_status_line": "malformed",
    "huge_line": "malformed",
    "error_500_endless_body": "http_5xx",
    "odd_error_event": "server_error",
    "ok": None,
}


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    with hostile_server() as running:
        yield running


def bench(url: str) -> PhaseResult:
    workload = WorkloadSpec(model="m", max_tokens=MAX_TOKENS, request_timeout_s=REQUEST_TIMEOUT_S,
                            stall_timeout_s=30.0, connect_timeout_s=5.0)
    spec = BenchmarkSpec(workload=workload,
                         phases=(PhaseSpec(1, requests=1, warmup=0, deadline_s=30),))
    return run_benchmark(url, spec).phases[0]


def test_every_behaviour_has_an_expected_outcome() -> None:
    assert set(EXPECTED) == set(BEHAVIOURS)


@pytest.mark.parametrize("behaviour", sorted(EXPECTED))
def test_a_hostile_answer_is_an_error_as_data_in_bounded_memory_and_time(server: HostileServer,
                                                                          behaviour: str) -> None:
    tracemalloc.start()
    try:
        started = time.monotonic()
        phase = bench(server.url(behaviour))
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert server.requests.get(behaviour, 0) >= 1  # the request did reach the hostile route
    assert len(phase.records) == 1
    record = phase.records[0]
    expected = EXPECTED[behaviour]
    assert (None if record.error_kind is None else str(record.error_kind)) == expected, \
           record.error_message
    assert peak < MEMORY_BUDGET_BYTES, f"peak {peak / 2**20:.1f} MiB"
    assert elapsed < REQUEST_TIMEOUT_S + 10  # generous: the machine is busy, but nothing may hang
    if expected is None:
        assert phase.completed == 1 and phase.output_tokens == 3
        return
    assert record.error_message
    assert phase.completed == 0 and phase.failed == 1
    assert phase.output_tokens == 0 and phase.aggregate_tok_s == 0  # a lie never becomes throughput
    assert record.output_tokens <= token_limit(MAX_TOKENS)
    if expected == "timeout":
        assert record.end_s >= REQUEST_TIMEOUT_S * 0.9


def test_lying_counts_are_named_in_the_message(server: HostileServer) -> None:
    record = bench(server.url("huge_usage")).records[0]
    assert "200000000" in (record.error_message or "") \
           and str(token_limit(MAX_TOKENS)) in (record.error_message or "")
    record = bench(server.url("nan_usage")).records[0]
    assert "nan" in (record.error_message or "").lower()


def test_nan_and_infinite_accept_length_figures_are_not_reported(server: HostileServer) -> None:
    # /metrics says NaN and -Inf, /server_info says NaN: no accept length rather than a NaN one
    phase = bench(server.url("ok"))
    assert phase.completed == 1
    assert phase.accept_length is None and phase.accept_length_source == "unavailable"
