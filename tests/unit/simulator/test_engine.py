"""The scheduler in-process: batching limits, chunking, lengths, seeds, the schedule's timing.

Most tests run the engine on a virtual clock (``VirtualClock``): simulated time jumps from deadline
to deadline, so nothing depends on the host's speed or load. The few that need the real loop only
check things a busy host cannot change (a deadline clock never runs early; requests of seconds are
still running after milliseconds)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from tuner.simulator import ground_truth, model, text
from tuner.simulator.clock import (
    ARRIVAL_SETTLE_MAX_S,
    ARRIVAL_SETTLE_S,
    Clock,
    ScheduleStats,
    VirtualClock,
)
from tuner.simulator.config import ServerConfig, resolve
from tuner.simulator.engine import Chunk, Engine, GenerationFailed, GenerationRequest
from tuner.simulator.profile import Profile, load_profile
from tuner.simulator.requests import RequestHandle

BASE = ["--model-path", "Qwen/Qwen3.5-122B-A10B", "--tp-size", "4", "--speculative-algorithm",
        "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4"]
PROMPT = "Explain how speculative decoding with a small draft model speeds up generation. " * 4


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_profile()


def configure(profile: Profile, *extra: str) -> ServerConfig:
    return resolve(profile, [*BASE, *extra], exit_on_error=False)


def virtual(profile: Profile, config: ServerConfig, seed: int, **kwargs: object) -> Engine:
    """An engine on a virtual clock at time scale 1 (so nothing coalesces)."""
    return Engine(profile, config, seed=seed, clock=VirtualClock(),
                  **kwargs)  # type: ignore[arg-type]


async def collect(engine: Engine, request: GenerationRequest) -> list[Chunk]:
    return [chunk async for chunk in engine.submit(request).chunks()]


async def run_all(engine: Engine, requests: Sequence[GenerationRequest]) -> list[list[Chunk]]:
    engine.start()
    try:
        return list(await asyncio.gather(*(collect(engine, r) for r in requests)))
    finally:
        await engine.stop()


def test_running_requests_never_exceed_the_cap(profile: Profile) -> None:
    config = configure(profile, "--max-running-requests", "4")

    async def scenario() -> tuple[int, int, int]:
        # requests of seconds, observed for ms
        engine = Engine(profile, config, time_scale=1.0, seed=1)
        engine.start()
        tasks = [asyncio.ensure_future(
            collect(engine, GenerationRequest(f"{PROMPT}{i}", 400, ignore_eos=True)))
                 for i in range(10)]
        peak = 0
        for _ in range(40):
            await asyncio.sleep(0.002)
            peak = max(peak, engine.num_running)
        running, waiting = engine.num_running, engine.num_waiting
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await engine.stop()
        return peak, running, waiting

    peak, running, waiting = asyncio.run(scenario())
    assert peak == 4 and running == 4 and waiting == 6


def test_kv_capacity_limits_the_batch_like_the_ground_truth(profile: Profile) -> None:
    config = configure(profile, "--max-running-requests", "64", "--max-total-tokens", "2000")
    prompt_tokens = text.count_prompt_tokens(PROMPT)
    expected = ground_truth.running_batch(config, 10, prompt_tokens, 300)
    assert 1 < expected < 10

    async def scenario() -> tuple[int, int]:
        engine = Engine(profile, config, time_scale=1.0, seed=1)
        engine.start()
        tasks = [
            asyncio.ensure_future(collect(engine, GenerationRequest(PROMPT, 300, ignore_eos=True)))
            for _ in range(10)]
        await asyncio.sleep(0.03)
        state = engine.num_running, engine.kv_used
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await engine.stop()
        return state

    running, used = asyncio.run(scenario())
    assert running == expected
    assert used <= config.max_total_num_tokens


def test_one_chunk_per_iteration_with_every_token_accepted_in_it(profile: Profile) -> None:
    config = configure(profile)
    engine = virtual(profile, config, seed=3)
    [chunks] = asyncio.run(
        run_all(engine, [GenerationRequest(PROMPT, 200, temperature=0.0, ignore_eos=True)]))
    sizes = [c.new_tokens for c in chunks]
    assert sizes[0] == 1  # the prefill's token comes alone
    assert all(1 <= n <= config.num_steps + 1 for n in sizes)
    assert sum(sizes) == 200 and chunks[-1].completion_tokens == 200
    assert max(sizes) > 1  # speculation did accept drafts
    # Every chunk after the first is one verify (one decode iteration of this lone request).
    assert chunks[-1].verify_ct == len(chunks) - 1 == engine.iterations
    assert [c.finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1].finish_reason == "length"
    assert "".join(c.text for c in chunks).count(" ") == 200  # one word per token


def test_output_length_follows_the_eos_rule(profile: Profile) -> None:
    config = configure(profile)
    engine = virtual(profile, config, seed=5)
    prompts = [f"question number {i}: {PROMPT}" for i in range(6)]
    requests = [GenerationRequest(p, 2000, temperature=0.7) for p in prompts]
    results = asyncio.run(run_all(engine, requests))
    for prompt, chunks in zip(prompts, results, strict=True):
        natural = text.output_length(profile, 5, prompt, 2000, False)
        assert chunks[-1].completion_tokens == natural < 2000
        assert chunks[-1].finish_reason == "stop"
    short = asyncio.run(run_all(virtual(profile, config, seed=5),
                                [GenerationRequest(prompts[0], 5)]))
    assert short[0][-1].completion_tokens == 5 and short[0][-1].finish_reason == "length"


def test_same_seed_same_chunks_and_another_seed_differs(profile: Profile) -> None:
    config = configure(profile)
    requests = [GenerationRequest(f"{PROMPT}{i}", 120, temperature=0.5, ignore_eos=True)
                for i in range(8)]

    def sizes(seed: int) -> list[list[int]]:
        results = asyncio.run(run_all(virtual(profile, config, seed=seed), requests))
        return [[c.new_tokens for c in chunks] for chunks in results]

    first = sizes(11)
    assert sizes(11) == first
    assert sizes(12) != first


def test_accept_length_converges_to_the_model(profile: Profile) -> None:
    config = configure(profile, "--max-running-requests", "64")
    engine = virtual(profile, config, seed=2)
    requests = [GenerationRequest(f"{PROMPT}{i}", 256, temperature=0.0, ignore_eos=True)
                for i in range(64)]
    asyncio.run(run_all(engine, requests))
    c = engine.counters
    assert c.generation_tokens_total == 64 * 256 and c.requests_total == 64
    assert c.prompt_tokens_total == 64 * text.count_prompt_tokens(f"{PROMPT}0")
    multiplier = model.predictability(profile.acceptance, f"{PROMPT}0")
    rates = model.position_rates(profile, config, temperature=0.0, multiplier=multiplier)
    expected = 1.0 + model.expected_accepted_drafts(rates)
    # Scheduler-side average (per verify, every token that verify produced).
    assert c.accepted_tokens / c.verify_forwards == pytest.approx(expected, rel=0.03)
    # The windowed Prometheus ratio counts the prefill token too: within a few per cent of the
    # expectation.
    assert c.generation_tokens_total / c.verify_calls_total == pytest.approx(expected, rel=0.05)
    assert c.avg_spec_accept_length is not None  # at least one decode-log interval passed


def test_over_large_tree_fails_every_decoding_request(profile: Profile) -> None:
    config = configure(profile, "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens",
                       "16")
    assert config.runtime_error is not None

    async def scenario() -> tuple[list[Chunk], BaseException | None]:
        engine = virtual(profile, config, seed=0)
        engine.start()
        one = await collect(engine, GenerationRequest("health", 1))  # served by the prefill alone
        error: BaseException | None = None
        try:
            await collect(engine, GenerationRequest(PROMPT, 50))
        except GenerationFailed as exc:
            error = exc
        await engine.stop()
        return one, error

    one, error = asyncio.run(scenario())
    assert one[-1].completion_tokens == 1
    assert isinstance(error, GenerationFailed) and "selected index k out of range" in str(error)


def test_flush_only_when_idle_and_it_resets_the_average(profile: Profile) -> None:
    config = configure(profile)

    async def scenario() -> tuple[bool, bool, float | None, float | None]:
        engine = virtual(profile, config, seed=0, decode_log_interval=5)
        engine.start()
        task = asyncio.ensure_future(collect(engine,
                                             GenerationRequest(PROMPT, 300, ignore_eos=True)))
        while engine.num_running == 0:
            await asyncio.sleep(0)
        busy = engine.flush()
        await task
        before = engine.counters.avg_spec_accept_length
        idle = engine.flush()
        after = engine.counters.avg_spec_accept_length
        await engine.stop()
        return busy, idle, before, after

    busy, idle, before, after = asyncio.run(scenario())
    assert busy is False and idle is True
    assert before is not None and before > 1.0 and after is None


def test_iteration_time_follows_the_model_and_the_time_scale(profile: Profile) -> None:
    config = configure(profile)
    scale = 20.0

    async def timed(clock: VirtualClock | None) -> tuple[float, int, float]:
        engine = Engine(profile, config, time_scale=scale, seed=4, clock=clock, coalesce=False)
        engine.start()
        start = engine.clock.now()
        await collect(engine, GenerationRequest(PROMPT, 150, ignore_eos=True))
        elapsed = engine.clock.now() - start
        iterations = engine.iterations
        await engine.stop()
        return elapsed, iterations, engine.simulated_ms

    elapsed, iterations, simulated_ms = asyncio.run(timed(VirtualClock(scale)))
    prompt_tokens = text.count_prompt_tokens(PROMPT)
    iteration_s = model.decode_iteration_ms(profile, config, 1, prompt_tokens + 75) / 1000.0
    expected = (model.prefill_ms(profile, prompt_tokens) / 1000.0
                + iterations * iteration_s) / scale
    # The noise (±3 % per iteration) averages out over ~60 iterations.
    assert elapsed == pytest.approx(expected, rel=0.02)
    assert elapsed == pytest.approx(simulated_ms / 1000.0 / scale)
    # On the real loop the deadline clock never runs early, however busy the host (it can only be
    # late).
    real_elapsed, real_iterations, _ = asyncio.run(timed(None))
    assert real_iterations == iterations
    assert real_elapsed >= 0.999 * elapsed


def test_stream_interval_sends_every_nth_iteration(profile: Profile) -> None:
    every = virtual(profile, configure(profile), seed=3)
    third = virtual(profile, configure(profile, "--stream-interval", "3"), seed=3)
    request = GenerationRequest(PROMPT, 200, temperature=0.0, ignore_eos=True)
    [one] = asyncio.run(run_all(every, [request]))
    [three] = asyncio.run(run_all(third, [request]))
    assert third.stream_interval == 3 and third.iterations == every.iterations
    # The prefill's token alone, then every third decode iteration's tokens together, and the last
    # chunk.
    assert three[0].new_tokens == 1
    assert [c.verify_ct for c in three[1:-1]] == list(range(3, every.iterations, 3))
    assert three[-1].verify_ct == every.iterations and three[-1].finish_reason == "length"
    cumulative = {c.completion_tokens for c in one}
    assert all(c.completion_tokens in cumulative for c in three) \
           and three[-1].completion_tokens == 200
    assert "".join(c.text for c in three) == "".join(c.text for c in one)


async def _timed_chunks(engine: Engine, clock: VirtualClock, request: GenerationRequest
                        ) -> list[tuple[float, Chunk]]:
    engine.start()
    try:
        start = clock.now()
        return [(clock.now() - start, c) async for c in engine.submit(request).chunks()]
    finally:
        await engine.stop()


def test_coalescing_keeps_the_schedule_a_client_measures(profile: Profile) -> None:
    """At a high time scale chunks coalesce (fewer events for the same tokens), each sent at the
    scheduled time of the iteration that completed it: the first and last token times, hence the
    per-request speed a client computes, are those of the uncoalesced stream."""
    config = configure(profile)
    request = GenerationRequest(PROMPT, 200, temperature=0.0, ignore_eos=True)
    runs = []
    for coalesce in (False, True):
        clock = VirtualClock(50.0)
        engine = Engine(profile, config, time_scale=50.0, seed=3, clock=clock, coalesce=coalesce)
        runs.append(asyncio.run(_timed_chunks(engine, clock, request)))
    plain, merged = runs
    assert len(merged) < len(plain) / 2
    assert sum(c.new_tokens for _, c in merged) == 200
    assert merged[0][0] == plain[0][0] and merged[-1][0] == pytest.approx(plain[-1][0])
    times = {round(t, 12): c.completion_tokens for t, c in plain}
    # Every coalesced chunk is sent when the uncoalesced stream had reached exactly its token count.
    assert all(times[round(t, 12)] == c.completion_tokens for t, c in merged)


def test_clock_catches_up_a_short_stall_and_counts_a_long_one() -> None:
    """The stall is a blocking sleep, so the lag is at least its length whatever the host does."""

    async def stalled(tolerance_s: float) -> tuple[ScheduleStats, float]:
        clock = Clock(time_scale=1.0, tolerance_s=tolerance_s)
        clock.restart()
        start = clock.deadline
        await clock.advance(1.0)
        time.sleep(0.05)  # the process "descheduled" for 50 ms
        for _ in range(5):
            await clock.advance(1.0)
        return clock.stats, clock.deadline - start

    caught, span = asyncio.run(stalled(tolerance_s=60.0))
    # Within the tolerance nothing is given up: the deadlines stay those of the schedule (6 × 1 ms).
    assert caught.dropped_s == 0 and caught.late_events == 0 and caught.max_lag_s >= 0.045
    assert span == pytest.approx(0.006)
    assert caught.simulated_s == pytest.approx(0.006) and caught.busy_s == pytest.approx(0.006)
    given_up, span = asyncio.run(stalled(tolerance_s=0.001))
    # Beyond it the schedule restarts (tolerance) behind now, and the lost time is reported.
    assert given_up.late_events >= 1 and given_up.dropped_s >= 0.045
    assert given_up.busy_s == pytest.approx(given_up.simulated_s + given_up.dropped_s)
    assert span >= 0.05


def test_the_timeline_is_the_schedule_plus_idle_gaps_never_the_lag() -> None:
    """What a load generator reads from the stamps: given-up lag is not in it, idle time is."""

    async def run() -> tuple[float, float, float, float]:
        clock = Clock(time_scale=1.0, tolerance_s=0.001)
        clock.restart()
        await clock.advance(1.0)
        time.sleep(0.05)  # descheduled: 50 ms of lag, nearly all given up
        await clock.advance(1.0)
        busy = clock.timeline_s
        await asyncio.sleep(0.02)  # idle: the engine waits for requests
        clock.restart()
        return clock.stats.dropped_s, busy, clock.timeline_s, clock.timeline_now()

    dropped, busy, restarted, now = asyncio.run(run())
    assert dropped >= 0.045 and busy == pytest.approx(0.002)
    assert restarted >= 0.022 and now == restarted


def test_chunks_and_arrivals_are_stamped_with_the_timeline(profile: Profile) -> None:
    config = configure(profile)

    async def run() -> tuple[list[RequestHandle], list[list[tuple[float, Chunk]]]]:
        clock = VirtualClock(10.0)
        engine = Engine(profile, config, time_scale=10.0, seed=1, clock=clock)
        engine.start()
        requests = [GenerationRequest(PROMPT, 40, ignore_eos=True) for _ in range(3)]
        handles = [engine.submit(r) for r in requests[:2]]  # a burst: they arrive at once
        late: list[asyncio.Task[list[tuple[float, Chunk]]]] = []

        async def read(handle: RequestHandle) -> list[tuple[float, Chunk]]:
            out = []
            async for chunk in handle.chunks():
                out.append((clock.now(), chunk))
                if not late:  # one more request while the engine is busy
                    handles.append(engine.submit(requests[2]))
                    late.append(asyncio.ensure_future(read(handles[2])))
            return out

        streams = list(await asyncio.gather(*(read(h) for h in handles[:2])))
        streams.append(await late[0])
        await engine.stop()
        return handles, streams

    handles, streams = asyncio.run(run())
    first, second, late = handles
    assert first.arrival_s == second.arrival_s == 0.0
    assert late.arrival_s is not None and 0.0 < late.arrival_s <= streams[2][0][1].at_s
    for stream in streams:  # each chunk carries the (virtual) time it was scheduled for
        assert all(chunk.at_s == pytest.approx(now) for now, chunk in stream)


def test_a_burst_of_arrivals_settles_before_the_schedule_starts(profile: Profile) -> None:
    """Above time scale 1 an engine woken from idle waits for the burst (ARRIVAL_SETTLE_S without an
    arrival): a request that comes while it waits arrives with the first and is prefilled with
    it."""
    config = configure(profile)

    async def run() -> list[tuple[float | None, float]]:
        engine = Engine(profile, config, time_scale=10.0, seed=1)
        engine.start()
        await asyncio.sleep(0.01)  # the engine idles
        one = engine.submit(GenerationRequest(PROMPT, 16, ignore_eos=True))
        for _ in range(3):
            await asyncio.sleep(0)  # the engine wakes and starts to wait for more
        two = engine.submit(GenerationRequest(PROMPT, 16, ignore_eos=True))
        firsts = []
        for handle in (one, two):
            chunk = await anext(handle.chunks())
            firsts.append((handle.arrival_s, chunk.at_s))
        await engine.stop()
        return firsts

    (arrival_1, first_1), (arrival_2, first_2) = asyncio.run(run())
    assert arrival_1 == arrival_2 and first_1 == first_2


@pytest.mark.parametrize("primed", [True, False])
@pytest.mark.parametrize("time_scale", [1.0, 10.0])
def test_a_burst_on_primed_connections_settles_across_a_stall_of_the_client(
        profile: Profile, primed: bool, time_scale: float) -> None:
    """A client stalled between two sends of one burst for longer than ARRIVAL_SETTLE_S (a busy
    host): while connections it opened for the burst are still unused (``burst_pending``) the
    engine keeps waiting, so both requests are prefilled together; without them it starts with the
    first alone. At every time scale: at 1 too, where there is no quiet window to wait for."""
    config = configure(profile)

    async def run() -> list[tuple[float | None, float]]:
        engine = Engine(profile, config, time_scale=time_scale, seed=1)
        sent: list[RequestHandle] = []
        engine.burst_pending = lambda: primed and len(sent) < 2
        engine.start()
        await asyncio.sleep(0.01)  # the engine idles
        sent.append(engine.submit(GenerationRequest(PROMPT, 16, ignore_eos=True)))
        await asyncio.sleep(10 * ARRIVAL_SETTLE_S)  # the client is descheduled
        sent.append(engine.submit(GenerationRequest(PROMPT, 16, ignore_eos=True)))
        firsts = []
        for handle in sent:
            chunk = await anext(handle.chunks())
            firsts.append((handle.arrival_s, chunk.at_s))
        await engine.stop()
        return firsts

    (arrival_1, first_1), (arrival_2, first_2) = asyncio.run(run())
    assert (arrival_1 == arrival_2 and first_1 == first_2) is primed
    assert 10 * ARRIVAL_SETTLE_S < ARRIVAL_SETTLE_MAX_S  # the stall stays inside the bound


class _HostClock(VirtualClock):
    """A virtual clock whose "now" a client can push forward inside the phase being slept through:
    where in an iteration a request lands is the host's timing (how fast the client reacted), not
    the model's."""

    def __init__(self) -> None:
        super().__init__(1.0)
        self.host_delay = 0.0

    def now(self) -> float:
        return self._now + self.host_delay


def test_latency_stamps_do_not_move_with_the_hosts_timing(profile: Profile) -> None:
    """TTFT and E2E from the stamps are the schedule's: a closed-loop client that answers each
    completion a little later inside the next iteration (a loaded host) gets exactly the same
    figures as a prompt one."""
    config = configure(profile)
    prompts = [f"{PROMPT} request {i} " + "word " * (i * 7 % 40) for i in range(24)]

    async def run(delays: Sequence[float]) -> list[tuple[float, float]]:
        clock = _HostClock()
        engine = Engine(profile, config, seed=3, clock=clock)
        engine.start()
        queue = list(range(len(prompts)))
        out: dict[int, tuple[float, float]] = {}

        async def worker() -> None:
            while queue:
                i = queue.pop(0)
                # the request reaches the server this late inside the iteration
                clock.host_delay = delays[i]
                handle = engine.submit(GenerationRequest(prompts[i], 48, ignore_eos=True))
                clock.host_delay = 0.0
                chunks = [chunk async for chunk in handle.chunks()]
                assert handle.arrival_s is not None
                out[i] = (chunks[0].at_s - handle.arrival_s, chunks[-1].at_s - handle.arrival_s)

        await asyncio.gather(*(worker() for _ in range(6)))
        await engine.stop()
        return [out[i] for i in range(len(prompts))]

    prompt_client = asyncio.run(run([0.0] * len(prompts)))
    # up to 0.9 ms late: inside every iteration of this configuration (the shortest prefill is
    # longer)
    slow_client = asyncio.run(run([(i * 0.37) % 0.9 / 1000 for i in range(len(prompts))]))
    assert slow_client == prompt_client
    ttft, e2e = zip(*prompt_client, strict=True)
    assert min(ttft) > 0 and all(a < b for a, b in zip(ttft, e2e, strict=True))


def test_a_replacement_joins_the_iteration_right_after_the_finish(profile: Profile) -> None:
    """Below the running cap, a closed-loop client's next request is admitted in the iteration after
    the one that finished its previous request, as ground_truth assumes: its TTFT is its prefill
    alone (or a prefill shared with another replacement), never the rest of an iteration it happened
    to land in. Without the hold it waited for a whole decode iteration more — how long the client
    took decided the batch."""
    config = configure(profile)
    prompt = f"{PROMPT} replace"
    lengths = [20 + 13 * i for i in range(12)]

    async def scenario() -> list[float]:
        engine = virtual(profile, config, seed=5)
        engine.start()
        queue = list(lengths)
        ttfts: list[float] = []

        async def worker() -> None:
            while queue:
                handle = engine.submit(GenerationRequest(prompt, queue.pop(0), ignore_eos=True))
                chunks = [chunk async for chunk in handle.chunks()]
                assert handle.arrival_s is not None
                ttfts.append(chunks[0].at_s - handle.arrival_s)

        await asyncio.gather(*(worker() for _ in range(3)))
        await engine.stop()
        return ttfts

    ttfts = asyncio.run(scenario())
    tokens = GenerationRequest(prompt, 1).input_tokens
    prefills = [model.prefill_ms(profile, k * tokens) / 1000 for k in (1, 2, 3)]
    assert len(ttfts) == len(lengths)
    for ttft in ttfts:
        assert any(ttft == pytest.approx(p) for p in prefills), (ttft, prefills)


def test_the_schedule_stands_still_while_it_holds() -> None:
    """A hold shifts the deadline by the time held (the lag the engine had is kept) and adds nothing
    to the timeline, so what arrives during it starts where the last phase ended; a hold nobody
    answers times out."""

    async def scenario() -> tuple[float, float, float, float, bool, bool, ScheduleStats]:
        clock = Clock(time_scale=1.0, lead_s=0.0)  # a hold that begins early: test_clock.py
        clock.restart()
        await clock.advance(1.0)
        timeline, deadline = clock.timeline_s, clock.deadline
        wake, arrived = asyncio.Event(), []

        async def client() -> None:
            await asyncio.sleep(0.02)
            arrived.append(clock.arrival_stamp())
            wake.set()

        task = asyncio.ensure_future(client())
        answered = await clock.hold(lambda: bool(arrived), wake, max_s=30.0)
        await task
        unanswered = await clock.hold(lambda: False, asyncio.Event(), max_s=0.01)
        return (timeline, clock.timeline_s, arrived[0], clock.deadline - deadline, answered,
                unanswered, clock.stats)

    timeline, after, stamp, shift, answered, unanswered, stats = asyncio.run(scenario())
    assert answered and not unanswered
    assert after == timeline and stamp == timeline
    assert shift >= 0.03 and stats.held_s == pytest.approx(shift)
    assert stats.holds_timed_out == 1
