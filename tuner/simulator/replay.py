"""A benchmark replayed against the engine in-process on a virtual clock: what the load generator
would measure if every chunk reached it at its scheduled time, whatever the host's speed or load.

The closed loop is the load generator's (``objectives.phase``): ``warmup`` requests at concurrency
min(C, warmup), then C clients each sending its next request as soon as the previous one ended,
exactly N requests in all; the window runs from the first send to the last completion (the phase
drains, as bench_serving's does). Records are built as the client builds them and the figures come
from ``objectives.metrics``, so this is the same computation on the schedule instead of on socket
arrival times. The server's own warmup request comes first, as in the live process, so that requests
are numbered (and their acceptance seeded) alike.

Phases end at their ``requests`` (a duration-only phase is not replayed: it would end after one
request).

Uses: the load-independent accuracy tests (schedule vs ground truth) and the reference column of
``bench/simulator_under_load.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from objectives import metrics
from objectives.records import RequestRecord
from objectives.spec import PhaseSpec, WorkloadSpec
from tuner.simulator.clock import VirtualClock
from tuner.simulator.config import ServerConfig
from tuner.simulator.engine import Engine, GenerationRequest
from tuner.simulator.profile import Profile

#: The server's startup warmup (run.py): one short greedy /generate before any client request.
_SERVER_WARMUP = GenerationRequest(prompt="The capital city of France is", max_new_tokens=8,
                                   temperature=0.0)
#: Prompt indices per phase, as ``objectives.runner`` numbers them.
PHASE_INDEX_STRIDE = 1_000_000

PromptText = Callable[[int], str]  # request index → the prompt text the server sees


@dataclass(frozen=True)
class ReplayedPhase:
    concurrency: int
    window_s: float  # simulated seconds
    per_request_tok_s_mean: float | None
    aggregate_tok_s: float | None
    completed: int
    records: tuple[RequestRecord, ...]


def _record(index: int, start_s: float, end_s: float, times: list[float],
            tokens: list[int]) -> RequestRecord:
    """As ``objectives.client.Trace.record``: ``start_s`` since the window's start, the rest since
    the send."""
    return RequestRecord(index=index, start_s=start_s, end_s=end_s,
                         chunk_times_s=tuple(times), chunk_tokens=tuple(tokens),
                         output_tokens=sum(tokens),
                         prompt_tokens=None, finish_reason="length", tokens_exact=True,
                         http_status=200, error_kind=None, error_message=None)


async def _phase(engine: Engine, clock: VirtualClock, workload: WorkloadSpec, spec: PhaseSpec,
                 prompt_text: PromptText, first_index: int) -> ReplayedPhase:
    def make(index: int) -> GenerationRequest:
        return GenerationRequest(prompt=prompt_text(index), max_new_tokens=workload.max_tokens,
                                 temperature=workload.temperature, ignore_eos=workload.ignore_eos)

    next_index = first_index
    warm = list(range(next_index, next_index + spec.warmup))
    next_index += spec.warmup

    async def warm_worker() -> None:
        while warm:
            i = warm.pop(0)
            handle = engine.submit(make(i))
            async for _ in handle.chunks():
                pass

    await asyncio.gather(*(warm_worker() for _ in range(min(spec.concurrency, spec.warmup))))

    t0 = clock.now()
    records: list[RequestRecord] = []
    quota = spec.requests or 1
    sent = 0

    async def worker() -> None:
        nonlocal next_index, sent
        while sent < quota:
            sent += 1
            i = next_index
            next_index += 1
            start = clock.now()
            times: list[float] = []
            tokens: list[int] = []
            async for chunk in engine.submit(make(i)).chunks():
                times.append(clock.now() - start)
                tokens.append(chunk.new_tokens)
            records.append(_record(i, start - t0, clock.now() - start, times, tokens))

    await asyncio.gather(*(worker() for _ in range(spec.concurrency)))
    t1 = max(t0 + r.start_s + r.end_s for r in records)
    window = t1 - t0
    speeds = metrics.per_request_tok_s(records)
    return ReplayedPhase(spec.concurrency, window, sum(speeds) / len(speeds) if speeds else None,
                         metrics.aggregate_tok_s(records, window), sum(1 for r in records if r.ok),
                         tuple(records))


def replay(profile: Profile, config: ServerConfig, workload: WorkloadSpec,
           phases: Sequence[PhaseSpec],
           prompt_text: PromptText, *, seed: int = 0, time_scale: float = 1.0,
           stream_coalescing: bool = False) -> list[ReplayedPhase]:
    """Every phase in order on one fresh engine (as ``run_benchmark`` against one server); figures
    in simulated time. ``time_scale`` only matters with ``stream_coalescing`` (the live server's
    chunking)."""

    async def main() -> list[ReplayedPhase]:
        clock = VirtualClock(time_scale)
        engine = Engine(profile, config, time_scale=time_scale, seed=seed, clock=clock,
                        coalesce=stream_coalescing)
        engine.start()
        try:
            async for _ in engine.submit(_SERVER_WARMUP).chunks():
                pass
            return [await _phase(engine, clock, workload, spec, prompt_text, k * PHASE_INDEX_STRIDE)
                    for k, spec in enumerate(phases)]
        finally:
            await engine.stop()

    phases_out = asyncio.run(main())
    # Virtual seconds are simulated seconds divided by the time scale: report simulated time.
    return [_rescale(p, time_scale) for p in phases_out]


def _rescale(p: ReplayedPhase, scale: float) -> ReplayedPhase:
    if scale == 1.0:
        return p
    return ReplayedPhase(p.concurrency, p.window_s * scale,
                         None
                         if p.per_request_tok_s_mean is None else p.per_request_tok_s_mean / scale,
                         None if p.aggregate_tok_s is None else p.aggregate_tok_s / scale,
                         p.completed, p.records)
