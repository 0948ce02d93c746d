"""What the load generator does with a simulator's account of its schedule, against a scripted fake
server (no timing in any assertion: the stamps and the account are scripted, whatever this machine's
speed):

* events stamped with the schedule ([arrival, chunk]) give the phase's figures on the server's
  clock;
* a schedule account whose given-up share passes the limit for the figures' clock fails the phase as
  ``simulator-overloaded`` — data in the result, and exit 3 from ``spectune bench``; figures on the
  schedule's clock do not contain the lag, and are never refused for it."""

from __future__ import annotations

import gc

import pytest

from objectives.overload import SIMULATOR_OVERLOADED
from objectives.runner import run_benchmark
from objectives.spec import BenchmarkSpec, PhaseSpec, WorkloadSpec
from tests.integration.objectives.fake_sglang import Mode, fake_server
from tuner.cli.bench import failure

pytestmark = pytest.mark.timeout(30)

WORKLOAD = WorkloadSpec(api="chat", max_tokens=64)


def bench(url: str, phase: PhaseSpec):
    return run_benchmark(url, BenchmarkSpec(workload=WORKLOAD, phases=(phase,))).phases[0]


@pytest.mark.parametrize("api", ["chat", "generate"])
def test_stamped_events_give_the_figures_on_the_servers_schedule(api: str) -> None:
    with fake_server(schedule=True) as server:
        result = run_benchmark(server.url,
                               BenchmarkSpec(workload=WorkloadSpec(api=api, max_tokens=64),
                                             phases=(PhaseSpec(1, requests=3, warmup=0),)))
    phase = result.phases[0]
    assert phase.timebase == "server" and phase.completed == 3
    # Request k arrives at k s of the schedule, its 10 chunks (1 + 9·3 tokens) 0.1 s apart from 0.1
    # s on.
    assert phase.duration_s == pytest.approx(3.0)
    assert [r.start_s for r in phase.records] == pytest.approx([0.0, 1.0, 2.0])
    assert phase.aggregate_tok_s == pytest.approx(3 * 28 / 3.0)
    assert phase.per_request_tok_s_mean == pytest.approx(27 / 0.9)
    assert phase.ttft_mean_ms == pytest.approx(100.0)
    # what the arrival times said stays beside it (the fake answers within milliseconds, not
    # seconds)
    assert phase.client_aggregate_tok_s is not None \
           and phase.client_aggregate_tok_s > 10 * phase.aggregate_tok_s
    assert phase.failure is None


def test_unstamped_events_keep_the_clients_clock() -> None:
    with fake_server() as server:
        phase = bench(server.url, PhaseSpec(1, requests=2, warmup=0))
    assert phase.timebase == "client" and phase.client_aggregate_tok_s is None
    # a real server: nothing to judge
    assert phase.failure is None and phase.simulator_dropped_share is None


@pytest.mark.parametrize(("stamped", "share", "failed"), [
    (False, 0.10, True),  # client's clock: 10 % given up distorts the figures (limit 2 %)
    (False, 0.01, False),
    (True, 0.90, False),  # schedule's clock: the lag is not in the figures, however much
])
def test_a_schedule_given_up_beyond_the_limit_fails_the_phase(stamped: bool, share: float,
                                                              failed: bool) -> None:
    with fake_server(schedule=stamped, dropped_share=share) as server:
        result = run_benchmark(server.url, BenchmarkSpec(
            workload=WORKLOAD, phases=(PhaseSpec(1, requests=2, warmup=0),)))
    phase = result.phases[0]
    assert phase.timebase == ("server" if stamped else "client")
    assert phase.simulator_dropped_share == pytest.approx(share)
    assert phase.completed == 2  # the figures stay, for inspection
    if failed:
        assert phase.failure == SIMULATOR_OVERLOADED and "gave up" in (phase.failure_message or "")
        assert phase.to_dict()["failure"] == SIMULATOR_OVERLOADED
        reason = failure(result, max_error_rate=0.1)
        assert reason is not None \
               and reason.startswith(f"C=1: {SIMULATOR_OVERLOADED}: the simulator gave up")
    else:
        assert phase.failure is None and failure(result, max_error_rate=0.1) is None


def test_a_failed_request_keeps_the_phase_on_the_schedule() -> None:
    with fake_server(schedule=True, modes=[Mode.OK, Mode.HTTP_500, Mode.OK]) as server:
        phase = bench(server.url, PhaseSpec(1, requests=3, warmup=0))
    assert phase.timebase == "server" and (phase.completed, phase.failed) == (2, 1)
    assert phase.output_tokens == 2 * 28
    ok = sorted(r.start_s for r in phase.records if r.ok)
    # arrivals 0 and 2 s on the schedule (the failure was number 1)
    assert ok == pytest.approx([0.0, 2.0])
    assert phase.duration_s == pytest.approx(3.0)


def test_a_phase_without_a_successful_request_is_not_judged_overloaded() -> None:
    with fake_server(modes=[Mode.HTTP_500], dropped_share=0.5) as server:
        phase = bench(server.url, PhaseSpec(1, requests=2, warmup=0))
    assert phase.completed == 0 and phase.error_rate == 1.0
    assert phase.failure is None and phase.simulator_dropped_share == pytest.approx(0.5)


def test_the_heap_from_before_the_benchmark_is_not_collected_during_it() -> None:
    """A full collection over a tuner process's heap stopped the closed loop mid-phase (the server's
    batch fell from 64 to 2); while the benchmark runs, what existed before it is frozen, and
    afterwards it is given back."""
    seen: list[int] = []
    with fake_server(schedule=True) as server:
        result = run_benchmark(server.url,
                               BenchmarkSpec(workload=WORKLOAD,
                                             phases=(PhaseSpec(1, requests=2, warmup=0),)),
                               progress=lambda _: seen.append(gc.get_freeze_count()))
    assert result.phases[0].completed == 2
    assert seen and min(seen) > 0
    assert gc.get_freeze_count() == 0
