"""The scheduler: continuous batching in asyncio, one decode iteration at a time.

Semantics are those ``ground_truth`` assumes, so the live server converges to it:

* FCFS admission, limited by the running-request cap and the KV pool; each request reserves its prompt plus
  ``max_new_tokens`` plus one iteration of draft tokens, as ``ground_truth.running_batch`` does;
* every iteration first prefills what it admitted (one extend batch; each new request gets its first token
  from it), then runs one decode iteration over all running requests lasting
  ``model.decode_iteration_ms(B, Σ context)`` times a uniform noise factor;
* in it each request gains 1 + accepted drafts tokens: positions are accepted in order with the model's
  conditional rates and the chain stops at the first rejection; a request never passes its output length;
* one chunk per request per iteration, carrying every token accepted in it.

Time is kept as a deadline clock: each phase ends at ``previous end + cost / time_scale``, so the Python work
between iterations and the event loop's timer granularity do not add up over a long run.

Randomness is seeded: the iteration noise comes from the engine's generator, acceptance from a stream per
request seeded by (seed, arrival number), so the same requests in the same order produce the same chunks.

Acceptance sampling: the chain accepts at least k drafts with probability ``S_k = p_1·…·p_k``, so one uniform
u per iteration gives exactly the chain's distribution (accepted = the largest k with u < S_k). The uniforms of
one request are a randomized golden-ratio (Weyl) sequence rather than independent draws: every iteration still
has the chain's distribution, but a request's total stays close to its expectation. With independent draws the
mean speed of 8 requests of 128 tokens wanders ±2 % around the model (one standard deviation) and a benchmark
would measure the dice as much as the configuration; this way the live server agrees with ``ground_truth``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from tuner.simulator import model, text
from tuner.simulator.config import ServerConfig
from tuner.simulator.profile import Profile

#: The Weyl sequence's step: 1/φ spreads consecutive points most evenly over [0, 1).
_GOLDEN = 0.6180339887498949
#: Behind schedule by more than this many phases' worth of time (or a millisecond, whichever is more), the
#: clock restarts from now instead of catching up in a burst of zero-length iterations (after the process was
#: descheduled, or at a time scale the machine cannot keep up with): a late server then measures slower, as a
#: real overloaded one would, never faster.
_MAX_LAG_PHASES = 3.0
_MIN_LAG_S = 0.001


@dataclass(frozen=True)
class GenerationRequest:
    prompt: str
    max_new_tokens: int
    temperature: float = 0.0
    ignore_eos: bool = False
    prompt_tokens: int | None = None  # given for input_ids; else counted from the prompt text
    internal: bool = False  # health checks: not counted in metrics or the accept-length average

    @property
    def input_tokens(self) -> int:
        return self.prompt_tokens if self.prompt_tokens is not None else text.count_prompt_tokens(self.prompt)


@dataclass(frozen=True)
class Chunk:
    """What one iteration gave one request."""

    text: str  # the new words
    new_tokens: int
    completion_tokens: int  # cumulative
    finish_reason: str | None  # "stop" | "length" on the last chunk
    verify_ct: int  # cumulative verify forwards of this request
    correct_drafts: int  # cumulative accepted draft tokens


@dataclass(frozen=True)
class SpecStats:
    """SGLang's per-request speculative meta_info (tokenizer_manager._calculate_spec_decoding_metrics)."""

    verify_ct: int
    num_correct_drafts: int
    num_proposed_drafts: int
    histogram: tuple[int, ...]  # index = accepted drafts in one verify
    completion_tokens: int

    @property
    def accept_length(self) -> float:
        return self.completion_tokens / self.verify_ct if self.verify_ct else 1.0

    @property
    def accept_rate(self) -> float:
        return self.num_correct_drafts / self.num_proposed_drafts if self.num_proposed_drafts else 0.0


class GenerationFailed(Exception):
    """The engine failed this request (e.g. the over-large draft tree's runtime error)."""


@dataclass(eq=False)
class RequestHandle:
    """The caller's side of one request: an async stream of chunks, then the request's statistics."""

    rid: str
    prompt_tokens: int
    output_length: int
    created: float = field(default_factory=time.time)
    _queue: asyncio.Queue[Chunk | GenerationFailed] = field(default_factory=asyncio.Queue)
    stats: SpecStats | None = None  # set with the last chunk

    async def chunks(self) -> AsyncIterator[Chunk]:
        """Chunks as the iterations produce them; raises ``GenerationFailed`` if the engine fails it."""
        while True:
            item = await self._queue.get()
            if isinstance(item, GenerationFailed):
                raise item
            yield item
            if item.finish_reason is not None:
                return


@dataclass(eq=False)
class _Running:
    request: GenerationRequest
    handle: RequestHandle
    survival: tuple[float, ...]  # S_k = P(at least k drafts accepted), k = 1..depth
    u: float  # the request's position in its Weyl sequence of uniforms
    writer: text.TokenWriter
    reserved: int
    generated: int = 0
    verify_ct: int = 0
    correct: int = 0
    histogram: list[int] = field(default_factory=list)
    cancelled: bool = False


@dataclass
class Counters:
    """Prometheus counters (updated when a request finishes, as SGLang's tokenizer manager does) and the
    scheduler's own totals for ``avg_spec_accept_length`` (reset by /flush_cache)."""

    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    verify_calls_total: int = 0
    requests_total: int = 0
    # scheduler side, since the last flush
    accepted_tokens: int = 0  # bonus included
    verify_forwards: int = 0
    avg_spec_accept_length: float | None = None  # snapshot every decode-log interval
    last_gen_throughput: float = 0.0
    interval_tokens: int = 0
    interval_started: float = field(default_factory=time.monotonic)


class Engine:
    def __init__(self, profile: Profile, config: ServerConfig, *, time_scale: float = 1.0, seed: int = 0,
                 decode_log_interval: int | None = None, on_log: Callable[[str], object] | None = None) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.profile = profile
        self.config = config
        self.time_scale = time_scale
        self.seed = seed
        interval = decode_log_interval or config.args.get("decode_log_interval") or 40
        self.decode_log_interval = int(interval)
        self.counters = Counters()
        self._on_log = on_log
        self.iterations = 0  # decode iterations since start
        self._rng = random.Random(text.stable_hash("engine", seed))
        self._waiting: deque[_Running] = deque()
        self._running: list[_Running] = []
        self._kv_used = 0
        self._arrivals = 0
        self._internal_arrivals = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._survival_cache: dict[tuple[float, float], tuple[float, ...]] = {}

    # ----- public ---------------------------------------------------------------------------------------
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
        length = text.output_length(self.profile, self.seed, request.prompt, max(request.max_new_tokens, 1),
                                    request.ignore_eos)
        if request.internal:
            self._internal_arrivals += 1
            number = f"internal-{self._internal_arrivals}"
        else:
            self._arrivals += 1
            number = str(self._arrivals)
        handle = RequestHandle(rid=rid or f"{text.stable_hash('rid', self.seed, number):016x}",
                               prompt_tokens=prompt_tokens, output_length=length)
        multiplier = model.predictability(self.profile.acceptance, request.prompt)
        self._waiting.append(_Running(
            request=request, handle=handle, survival=self._survival(request.temperature, multiplier),
            u=random.Random(text.stable_hash("accept", self.seed, number)).random(),
            writer=text.TokenWriter(self.seed, request.prompt),
            reserved=prompt_tokens + max(request.max_new_tokens, 1) + self.config.draft_tokens,
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

    # ----- scheduling ------------------------------------------------------------------------------------
    def _survival(self, temperature: float, multiplier: float) -> tuple[float, ...]:
        key = (temperature, multiplier)
        if key not in self._survival_cache:
            rates = model.position_rates(self.profile, self.config, temperature=temperature, multiplier=multiplier)
            survival, chain = [], 1.0
            for p in rates:
                chain *= p
                survival.append(chain)
            self._survival_cache[key] = tuple(survival)
        return self._survival_cache[key]

    def _admit(self) -> list[_Running]:
        admitted = []
        capacity = self.config.max_total_num_tokens
        while self._waiting:
            head = self._waiting[0]
            if head.cancelled:
                self._waiting.popleft()
                continue
            if len(self._running) >= self.config.max_running_requests:
                break
            # A request larger than the whole pool still runs alone rather than wait forever.
            if self._kv_used + head.reserved > capacity and self._running:
                break
            self._waiting.popleft()
            self._running.append(head)
            self._kv_used += head.reserved
            admitted.append(head)
        return admitted

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        clock = loop.time()
        while True:
            self._drop_cancelled()
            if self.idle:
                self._wake.clear()
                await self._wake.wait()
                clock = loop.time()
            admitted = self._admit()
            if admitted:
                prompt = sum(r.handle.prompt_tokens for r in admitted)
                clock = await self._advance(clock, model.prefill_ms(self.profile, prompt))
                for r in admitted:
                    if not r.cancelled:
                        self._emit(r, 1)
            self._drop_cancelled()
            if not self._running:
                continue
            batch = len(self._running)
            context = sum(r.handle.prompt_tokens + r.generated for r in self._running)
            noise = self.profile.timing.noise
            ms = model.decode_iteration_ms(self.profile, self.config, batch, context)
            ms *= 1.0 + self._rng.uniform(-noise, noise)
            clock = await self._advance(clock, ms)
            self._decode()

    async def _advance(self, clock: float, cost_ms: float) -> float:
        """Sleep until ``clock`` (loop time of the previous deadline) plus ``cost_ms`` of simulated time;
        returns the new deadline."""
        loop = asyncio.get_running_loop()
        duration = cost_ms / 1000.0 / self.time_scale
        target = clock + duration
        now = loop.time()
        if now - target > max(_MAX_LAG_PHASES * duration, _MIN_LAG_S):
            target = now
        if target > now:
            await asyncio.sleep(target - now)
        else:
            await asyncio.sleep(0)  # let the handlers write what the previous iteration produced
        return target

    def _drop_cancelled(self) -> None:
        gone = [r for r in self._running if r.cancelled]
        for r in gone:
            self._release(r)

    def _release(self, r: _Running) -> None:
        self._running.remove(r)
        self._kv_used -= r.reserved

    def _decode(self) -> None:
        self.iterations += 1
        error = self.config.runtime_error
        for r in list(self._running):
            if r.cancelled:
                self._release(r)
                continue
            if error is not None:
                # torch.topk in organize_draft_results fails for the whole batch (#5160).
                self._release(r)
                r.handle._queue.put_nowait(GenerationFailed(error))
                continue
            r.u = (r.u + _GOLDEN) % 1.0
            accepted = 0
            for s_k in r.survival:
                if r.u >= s_k:
                    break
                accepted += 1
            remaining = r.handle.output_length - r.generated
            n = min(1 + accepted, remaining)
            r.verify_ct += 1
            r.correct += n - 1
            while len(r.histogram) <= n - 1:
                r.histogram.append(0)
            r.histogram[n - 1] += 1
            if not r.request.internal:
                self.counters.accepted_tokens += n
                self.counters.verify_forwards += 1
            self._emit(r, n)
        if self.iterations % self.decode_log_interval == 0:
            self._log_interval()

    def _emit(self, r: _Running, n: int) -> None:
        r.generated += n
        if not r.request.internal:
            self.counters.interval_tokens += n
        finish = None
        if r.generated >= r.handle.output_length:
            hit_limit = r.handle.output_length >= max(r.request.max_new_tokens, 1)
            finish = "length" if hit_limit else "stop"
        chunk = Chunk(text="".join(r.writer.take(n)), new_tokens=n, completion_tokens=r.generated,
                      finish_reason=finish, verify_ct=r.verify_ct, correct_drafts=r.correct)
        if finish is not None:
            self._finish(r)
        r.handle._queue.put_nowait(chunk)

    def _finish(self, r: _Running) -> None:
        self._release(r)
        proposed = r.verify_ct * max(self.config.draft_tokens - 1, 0)
        r.handle.stats = SpecStats(verify_ct=r.verify_ct, num_correct_drafts=r.correct, num_proposed_drafts=proposed,
                                   histogram=tuple(r.histogram), completion_tokens=r.generated)
        if r.request.internal:
            return
        c = self.counters
        c.requests_total += 1
        c.prompt_tokens_total += r.handle.prompt_tokens
        c.generation_tokens_total += r.generated
        c.verify_calls_total += r.verify_ct

    def _log_interval(self) -> None:
        c = self.counters
        if c.verify_forwards:
            c.avg_spec_accept_length = c.accepted_tokens / c.verify_forwards
        now = time.monotonic()
        elapsed = now - c.interval_started
        c.last_gen_throughput = c.interval_tokens / elapsed if elapsed > 0 else 0.0
        c.interval_tokens = 0
        c.interval_started = now
        if self._on_log is not None:
            capacity = self.config.max_total_num_tokens
            accept = f"accept len: {c.avg_spec_accept_length:.2f}, " if c.avg_spec_accept_length else ""
            self._on_log(f"Decode batch. #running-req: {len(self._running)}, #token: {self._kv_used}, "
                         f"token usage: {self._kv_used / capacity if capacity else 0:.2f}, {accept}"
                         f"gen throughput (token/s): {c.last_gen_throughput:.2f}, #queue-req: {len(self._waiting)}")
