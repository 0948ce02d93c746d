"""The scheduler: continuous batching in asyncio, one decode iteration at a time.

Semantics are those ``ground_truth`` assumes, so the live server converges to it:

* FCFS admission, limited by the running-request cap and the KV pool; each request reserves its
  prompt plus ``max_new_tokens`` plus one iteration of draft tokens, as
  ``ground_truth.running_batch`` does;
* every iteration first prefills what it admitted (one extend batch; each new request gets its first
  token from it), then runs one decode iteration over all running requests lasting
  ``model.decode_iteration_ms(B, Σ context)`` times a uniform noise factor;
* in it each request gains 1 + accepted drafts tokens: positions are accepted in order with the
  model's conditional rates and the chain stops at the first rejection; a request never passes its
  output length;
* a request streams a chunk with its first token (the prefill's), with its last, and in between
  every ``--stream-interval`` decode iterations (SGLang's option, default 1), carrying every token
  since the last.

Coalescing (fewer, larger chunks at a high time scale): tuner/simulator/coalescing.py.

Time is kept by ``clock.Clock``: a deadline schedule (Python work and timer granularity do not add
up) that catches up short stalls, counts the lag it gives up (``ScheduleStats``), holds while
clients replace finished requests.

Seeded randomness (noise: the engine's; acceptance: per (seed, arrival number),
tuner/simulator/running.py): same requests, same chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import deque
from collections.abc import Callable

from tuner.simulator import faults, model, text
from tuner.simulator.adaptive import Controller
from tuner.simulator.clock import (
    ARRIVAL_SETTLE_MAX_S,
    ARRIVAL_SETTLE_S,
    REPLACEMENT_HOLD_MAX_S,
    Clock,
    VirtualClock,
)
from tuner.simulator.coalescing import (
    EVENT_BUDGET_PER_S,
    FIRST_CHUNK_PAUSE_FROM_SCALE,
    FIRST_CHUNK_PAUSE_S,
    MIN_CHUNKS,
)
from tuner.simulator.config import ServerConfig
from tuner.simulator.prefill import PrefillBatch, PrefillLimits, form_batch
from tuner.simulator.profile import Profile
from tuner.simulator.requests import (
    Chunk,
    Counters,
    GenerationFailed,
    GenerationRequest,
    RequestHandle,
    SpecStats,
)
from tuner.simulator.running import Running, first_uniform, survival

__all__ = ["Chunk", "Counters", "Engine", "GenerationFailed", "GenerationRequest", "RequestHandle",
           "SpecStats"]


class Engine:
    def __init__(self, profile: Profile, config: ServerConfig, *, time_scale: float = 1.0,
                 seed: int = 0, decode_log_interval: int | None = None,
                 on_log: Callable[[str], object] | None = None, clock: Clock | None = None,
                 coalesce: bool = True,
                 on_fatal: Callable[[list[str]], object] | None = None) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.profile = profile
        self.config = config
        self.time_scale = time_scale
        self.seed = seed
        interval = decode_log_interval or config.args.get("decode_log_interval") or 40
        self.decode_log_interval = int(interval)
        self.stream_interval = max(1, int(config.args.get("stream_interval") or 1))
        self._first_chunk_pause_s = (FIRST_CHUNK_PAUSE_S
                                     if time_scale >= FIRST_CHUNK_PAUSE_FROM_SCALE else 0.0)
        # An explicit --stream-interval is taken as asked (a client that wants one chunk per
        # iteration gets it); only the default lets the engine coalesce.
        explicit = any(a == "--stream-interval" or a.startswith("--stream-interval=")
                       for a in config.argv)
        self.coalescing = coalesce and time_scale > 1 and not explicit
        #: simulated ms between a request's chunks per running request (0: no coalescing)
        self._gap_ms_per_request = (1000.0 * time_scale / EVENT_BUDGET_PER_S if self.coalescing
                                    else 0.0)
        self.clock = clock or Clock(time_scale)
        # between a restart and going idle: arrivals are stamped as they come
        self._on_schedule = False
        # the HTTP side's PrimedConnections.pending: a burst's sends are still to come (bursts.py)
        self.burst_pending: Callable[[], bool] = lambda: False
        self._settle_s = (ARRIVAL_SETTLE_S
                          if time_scale > 1 and not isinstance(self.clock, VirtualClock) else 0.0)
        self.simulated_ms = 0.0  # the schedule's simulated time since start
        self.counters = Counters()
        self._on_log = on_log
        self.iterations = 0  # decode iterations since start
        self._rng = random.Random(text.stable_hash("engine", seed))
        self._waiting: deque[Running] = deque()
        self._running: list[Running] = []  # admitted (a chunked one too: it decodes once prefilled)
        self._chunked: Running | None = None  # partly prefilled: the next prefill continues it
        self._prefill_limits = PrefillLimits.of(config)
        self._kv_used = 0
        self._arrivals = 0
        self._internal_arrivals = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._survival_cache: dict[tuple[float, float], tuple[float, ...]] = {}
        self._late_logged_at = 0.0
        # the profile's failure modes
        self.faults = faults.FaultRuntime.of(profile.faults, config, on_fatal)
        # requests completed since the warmup (run.py resets it): what a hang counts
        self.served = 0
        self.adaptive = (Controller(config.adaptive, config.cuda_graph_bs)
                         if config.adaptive is not None else None)
        self._steps: int | None = None  # adaptive: draft steps of the iteration in flight
        self._switch_ms = 0.0  # a pending adaptive switch's cost, paid by the next iteration
        # Replacement holds: on (off after one timed out), requests the last decode finished, in
        # flight before it
        self._holding, self._finished_in_iteration, self._hold_target = True, 0, 0

    # ----- public ---------------------------------------------------------------------------------
    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def started(self) -> bool:
        return self._task is not None

    @property
    def idle(self) -> bool:
        return not self._running and not self._waiting

    @property
    def kv_used(self) -> int:
        return self._kv_used

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="scheduler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def submit(self, request: GenerationRequest, rid: str | None = None) -> RequestHandle:
        prompt_tokens = request.input_tokens
        length = text.output_length(self.profile, self.seed, request.prompt,
                                    max(request.max_new_tokens, 1), request.ignore_eos)
        if request.internal:
            self._internal_arrivals += 1
            number = f"internal-{self._internal_arrivals}"
        else:
            self._arrivals += 1
            number = str(self._arrivals)
        handle = RequestHandle(rid=rid or f"{text.stable_hash('rid', self.seed, number):016x}",
                               prompt_tokens=prompt_tokens, output_length=length)
        if self._on_schedule:  # else it arrives when the schedule (re)starts (_restart)
            handle.arrival_s = self.clock.arrival_stamp()
        multiplier = model.acceptance_multiplier(self.profile, self.config, request.prompt)
        self._holding = True
        self._waiting.append(Running(
            request=request, handle=handle,
            survival=self._survival(request.temperature, multiplier),
            u=first_uniform(self.seed, number),
            writer=text.TokenWriter(self.seed, request.prompt,
                                    self.faults.faults.diverge_after_tokens),
            reserved=prompt_tokens + max(request.max_new_tokens, 1) + self.config.draft_tokens,
            prefill_left=max(prompt_tokens, 1),
        ))
        self._wake.set()
        return handle

    def cancel(self, handle: RequestHandle) -> None:
        """The client went away: free its slot at the next iteration (SGLang aborts the request)."""
        for item in (*self._waiting, *self._running):
            if item.handle is handle:
                item.cancelled = True

    def flush(self) -> bool:
        """/flush_cache: only when idle; resets the accept-length totals."""
        if not self.idle:
            return False
        c = self.counters
        c.accepted_tokens = c.verify_forwards = 0
        c.avg_spec_accept_length = None
        return True

    # ----- scheduling -----------------------------------------------------------------------------
    def _survival(self, temperature: float, multiplier: float) -> tuple[float, ...]:
        key = (temperature, multiplier)
        if key not in self._survival_cache:
            self._survival_cache[key] = survival(self.profile, self.config, temperature, multiplier)
        return self._survival_cache[key]

    def _prefill_batch(self) -> PrefillBatch:
        batch = form_batch(self._prefill_limits, self._chunked, self._waiting, self._fits,
                           self._start_running)
        self._chunked = batch.chunked
        return batch

    def _fits(self, head: Running) -> bool:
        # A request larger than the whole pool still runs alone rather than wait forever.
        return len(self._running) < self.config.max_running_requests and (
            self._kv_used + head.reserved <= self.config.max_total_num_tokens or not self._running)

    def _start_running(self, r: Running) -> None:
        self._running.append(r)
        self._kv_used += r.reserved

    async def _loop(self) -> None:
        self._restart()
        while True:
            self._drop_cancelled()
            if self.idle:
                self._on_schedule = False
                self._wake.clear()
                await self._wake.wait()
                if self._settle_s or self.burst_pending():
                    await self._settle()
                self._restart()
            if self.faults.stuck(None, self.served):
                # requests and health checks go unanswered until stop()
                await asyncio.Event().wait()
            prefill = self._prefill_batch()
            if prefill.tokens:
                await self._advance(model.prefill_ms(self.profile, prefill.tokens))
                for r in prefill.done:
                    if not r.cancelled:
                        self._emit(r, 1, stream=True)
                if self._first_chunk_pause_s and not isinstance(self.clock, VirtualClock):
                    # Let the first chunks leave alone: at a very high time scale a whole short
                    # request fits in one timer tick, its chunks would reach the client in one read
                    # and its decode speed would be undefined. The pause is lag the clock then
                    # catches up (docs/simulator.md).
                    await asyncio.sleep(self._first_chunk_pause_s)
                # SGLang runs a prefill batch whenever it can form one (prefill.py): a chunk to
                # continue, or a request waiting that may run; so no request decodes half-prefilled
                if self._chunked is not None or (self._waiting and self._fits(self._waiting[0])):
                    continue
            self._drop_cancelled()
            if not self._running:
                continue
            batch = len(self._running)
            if self.faults.stuck(batch, self.served):
                await asyncio.Event().wait()
            context = sum(r.handle.prompt_tokens + r.generated for r in self._running)
            noise = self.profile.timing.noise
            self._steps = self.adaptive.steps_for(batch) if self.adaptive is not None else None
            ms = model.decode_iteration_ms(self.profile, self.config, batch, context,
                                           steps=self._steps)
            ms = ms * (1.0 + self._rng.uniform(-noise, noise)) + self._switch_ms
            self._switch_ms = 0.0
            await self._advance(ms)
            # in flight before the finishes
            self._hold_target = len(self._running) + len(self._waiting)
            self._decode()
            # slots the queue can't fill
            if self._holding and self._finished_in_iteration > len(self._waiting):
                self._holding = await self.clock.hold(self._replaced, self._wake,
                                                      REPLACEMENT_HOLD_MAX_S)

    def _replaced(self) -> bool:
        return len(self._running) + len(self._waiting) >= self._hold_target

    def _restart(self) -> None:
        self.clock.restart()
        self._on_schedule = True
        for r in self._waiting:
            if r.handle.arrival_s is None:
                r.handle.arrival_s = self.clock.timeline_s

    async def _settle(self) -> None:
        # The quiet window only above time scale 1 (the real server sees real sends as they come);
        # a burst announced by primed connections is waited for at every scale, so that a host
        # stalling the client does not split it (bursts.py).
        loop = asyncio.get_running_loop()
        give_up = loop.time() + ARRIVAL_SETTLE_MAX_S
        seen = -1
        while loop.time() < give_up:
            arriving = self._settle_s > 0 and seen != len(self._waiting)
            if not arriving and not self.burst_pending():
                break
            seen = len(self._waiting)
            await asyncio.sleep(self._settle_s or ARRIVAL_SETTLE_S)

    async def _advance(self, cost_ms: float) -> None:
        self.simulated_ms += cost_ms
        dropped = await self.clock.advance(cost_ms)
        if dropped > 0:
            self._report_late(dropped)

    def _report_late(self, dropped_s: float) -> None:
        stats = self.clock.stats
        # One line per second of trouble at most: the log must not add to the load it reports.
        if self._on_log is not None and (stats.late_events == 1
                                         or stats.busy_s - self._late_logged_at >= 1.0):
            self._late_logged_at = stats.busy_s
            share = stats.dropped_s / stats.busy_s if stats.busy_s else 0.0
            self._on_log(f"Simulator behind schedule: gave up {dropped_s * 1000:.1f} ms (total "
                         f"{stats.dropped_s:.3f} s, {share:.1%} of busy time; time scale "
                         f"{self.time_scale:g} is too fast for this machine's free CPU)")

    def _drop_cancelled(self) -> None:
        gone = [r for r in self._running if r.cancelled]
        for r in gone:
            self._release(r)

    def _release(self, r: Running) -> None:
        self._running.remove(r)
        self._kv_used -= r.reserved

    def _decode(self) -> None:
        self.iterations += 1
        self._finished_in_iteration = 0
        error = self.config.runtime_error
        batch = len(self._running)
        corrects: list[float] = []
        for r in list(self._running):
            if r.cancelled:
                self._release(r)
                continue
            if error is not None:
                # torch.topk in organize_draft_results fails for the whole batch (#5160).
                self._release(r)
                r.handle._queue.put_nowait(GenerationFailed(error))
                continue
            accepted = r.accept(self._steps)
            corrects.append(accepted)
            n = min(1 + accepted, r.handle.output_length - r.generated)
            r.record(n)
            if not r.request.internal:
                self.counters.accepted_tokens += n
                self.counters.verify_forwards += 1
            r.since_chunk += 1
            # Coalescing never leaves a request with fewer than about MIN_CHUNKS chunks: with only
            # its first and last, a short request at a high time scale is over within a millisecond
            # and both chunks may reach the client in one read, leaving its decode speed undefined.
            gap_ms = self._gap_ms_per_request * len(self._running)
            due = (self.simulated_ms - r.chunk_at_ms >= gap_ms
                   or r.pending + n >= max(1, r.handle.output_length // MIN_CHUNKS))
            stream = r.since_chunk >= self.stream_interval and due
            self._emit(r, n, stream=stream)
        line = self.adaptive.on_verify(corrects, batch) if self.adaptive is not None else None
        if line is not None:
            self._switch_ms = self.profile.adaptive.switch_ms
            if self._on_log is not None:
                self._on_log(line)
        if self.iterations % self.decode_log_interval == 0:
            self._log_interval()

    def _emit(self, r: Running, n: int, *, stream: bool) -> None:
        """``n`` more tokens for ``r``; streamed now if ``stream`` or the request is done, else held
        back."""
        r.generated += n
        r.pending += n
        if not r.request.internal:
            self.counters.interval_tokens += n
        finish = None
        if r.generated >= r.handle.output_length:
            hit_limit = r.handle.output_length >= max(r.request.max_new_tokens, 1)
            finish = "length" if hit_limit else "stop"
        if finish is None and not stream:
            return
        chunk = Chunk(text="".join(r.writer.take(r.pending)), new_tokens=r.pending,
                      completion_tokens=r.generated, finish_reason=finish,
                      verify_ct=r.verify_ct, correct_drafts=r.correct,
                      at_s=self.clock.timeline_s)
        r.pending = r.since_chunk = 0
        r.chunk_at_ms = self.simulated_ms
        if finish is not None:
            self._finish(r)
        r.handle._queue.put_nowait(chunk)

    def _finish(self, r: Running) -> None:
        self._release(r)
        proposed = r.verify_ct * max(self.config.draft_tokens - 1, 0)
        r.handle.stats = SpecStats(verify_ct=r.verify_ct, num_correct_drafts=r.correct,
                                   num_proposed_drafts=proposed,
                                   histogram=tuple(r.histogram), completion_tokens=r.generated)
        if r.request.internal:
            return
        self._finished_in_iteration += 1
        c = self.counters
        self.served += 1
        c.requests_total += 1
        c.prompt_tokens_total += r.handle.prompt_tokens
        c.generation_tokens_total += r.generated
        c.verify_calls_total += r.verify_ct

    def _log_interval(self) -> None:
        line = self.counters.interval_line(len(self._running), self._kv_used,
                                           self.config.max_total_num_tokens, len(self._waiting))
        if self._on_log is not None:
            self._on_log(line)
