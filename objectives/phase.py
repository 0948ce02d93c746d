"""One closed-loop phase: warm up, then keep C requests in flight until the phase has measured
enough.

Stages:
1. Warmup: ``warmup`` requests at concurrency min(C, warmup), awaited and discarded (bench_serving's
   warmup). They prime the server and prove the endpoint answers; the server is idle afterwards.
2. The accept-length probe starts (Prometheus counters, or ``/flush_cache`` — which needs that idle
   server).
3. Measured: C workers, each sending its next request as soon as the previous one ends.
   With ``n`` requests the phase sends exactly n, then drains, as sglang.bench_serving does: the
   window ``[t0, t1]`` runs from the first send to the last completion, and aggregate throughput is
   the output tokens of the n requests / (t1 − t0). Stopping at the n-th completion while workers
   keep sending (what this module did before) lets the next wave's prefill slow the window's last
   requests, which read C=64 throughput ~3 % low next to bench_serving, GuideLLM and AIPerf.
   Other stops end the window at once: the duration, the throughput's CI within target (checked
   twice a second), the phase deadline, or a run of consecutive failures that shows the server is
   not serving. Requests still in flight then are cancelled (not errors; their tokens up to t1
   count), so a timed window runs at concurrency C to its end. At the deadline they become
   ``deadline`` errors instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Collection
from time import perf_counter
from typing import Literal

import aiohttp
import numpy as np

from objectives import metrics, paired
from objectives.accept_length import AcceptLength, AcceptLengthProbe
from objectives.api import ApiFormat
from objectives.client import Timeouts, Trace, send
from objectives.confidence import MeanSample, aggregate_sample, relative_half_width
from objectives.latency_intervals import latency_intervals
from objectives.overload import Overload, judge, read_account
from objectives.progress import PhaseProgress, ProgressCallback
from objectives.records import ErrorKind, RequestRecord
from objectives.results import PhaseResult, StopReason
from objectives.spec import PhaseSpec
from objectives.usage import UsageProblem, chunk_tokens, token_limit

_TICK_S = 0.25  # progress updates and the CI check; cheap next to any request
_TOUCH_TIMEOUT_S = 2.0  # opening the measured part's connections (PhaseRunner._open_connections)
_TOUCH_BYTES = 1 << 16
# fewer finished requests say too little about the spread, whatever the CI claims
_CI_MIN_REQUESTS = 10


def failure_limit(concurrency: int) -> int:
    """Consecutive failed requests that end a phase early: every worker failed about twice in a
    row."""
    return max(16, 2 * concurrency)


BodyFactory = Callable[[int], bytes]


class PhaseRunner:
    """Runs one ``PhaseSpec`` against one server; ``await run()`` returns its ``PhaseResult``."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, api: ApiFormat,
                 body: BodyFactory,
                 spec: PhaseSpec, timeouts: Timeouts, progress: ProgressCallback | None = None,
                 first_index: int = 0, max_tokens: int | None = None) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + api.path
        self.api = api
        self.body = body
        self.spec = spec
        self.timeouts = timeouts
        self.progress = progress
        self.next_index = first_index
        self.limit = token_limit(max_tokens)  # completion tokens beyond this are a server's lie
        # measured-stage state
        self.t0 = 0.0
        self.t1 = 0.0
        self.window = 0.0  # the measured window's length, t1 − t0
        self.records: list[RequestRecord] = []
        self.inflight: dict[int, Trace] = {}
        self.stop = asyncio.Event()
        self.stopped_by: StopReason | None = None
        self.sent = 0  # measured requests sent
        self.finished = 0
        self.failed = 0
        self.consecutive_failures = 0
        self.finished_tokens = 0
        self.ci_half_width: float | None = None
        self.timebase: Literal["client", "server"] = "client"
        # by arrival times, when the figures are the server's
        self.client_aggregate: float | None = None
        # a simulator's account of its schedule (objectives.overload)
        self.overload = Overload(None, None, None)

    async def run(self) -> PhaseResult:
        started = perf_counter()
        deadline = started + self.spec.deadline_s
        warmup_failed = await self._warmup(deadline)
        probe = AcceptLengthProbe(self.session, self.base_url)
        if perf_counter() < deadline:
            await self._open_connections(deadline)
            await probe.begin()
            before = await read_account(self.session, self.base_url)
            await self._measure(deadline)
            after = await read_account(self.session, self.base_url) if before is not None else None
            self.overload = judge(before, after, self.timebase,
                                  measured=any(r.ok for r in self.records))
        else:
            self.stopped_by = "deadline"
            self.t0 = self.t1 = perf_counter()
        accept = await probe.end() if self.records else AcceptLength(None, "unavailable")
        self._emit("done")
        return self._result(warmup_failed, accept)

    # ----- warmup ---------------------------------------------------------------------------------
    async def _warmup(self, deadline: float) -> int:
        count = self.spec.warmup
        if count <= 0:
            return 0
        self._emit("warmup")
        first = self.next_index
        self.next_index += count
        queue = list(range(first, first + count))
        results: list[RequestRecord] = []

        async def worker() -> None:
            while queue:
                index = queue.pop(0)
                trace = Trace(index, self.limit)
                results.append(await send(self.session, self.url, self.body(index), self.api, trace,
                                          self.timeouts, perf_counter()))

        workers = [asyncio.ensure_future(worker())
                   for _ in range(min(self.spec.concurrency, count))]
        _, pending = await asyncio.wait(workers, timeout=max(0.0, deadline - perf_counter()))
        await _cancel(pending)
        return sum(1 for r in results if r.error_kind is not None) + len(queue) + len(pending)

    async def _open_connections(self, deadline: float) -> None:
        """Leave C keep-alive connections open for the measured part's first sends (C cheap GETs at
        once).

        Otherwise its first wave waits for C − warmup TCP handshakes: ~70 ms for 57 of them on a
        busy 2-core machine, 0.7 s of simulated time at 10x (a simulator's first prefill then splits
        in two). Connection setup is not what a phase measures; any answer (or none) will do, and a
        slow or endless one is cut short (the connection is then simply not kept)."""
        if self.spec.concurrency <= max(1, self.spec.warmup):
            return  # the warmup left as many open (or one request connects once)
        timeout = aiohttp.ClientTimeout(total=max(0.1,
                                                  min(_TOUCH_TIMEOUT_S, deadline - perf_counter())))

        async def touch() -> None:
            try:
                async with self.session.get(self.base_url + "/v1/models",
                                            timeout=timeout) as response:
                    await response.content.read(_TOUCH_BYTES)
            except (aiohttp.ClientError, TimeoutError, OSError):
                pass

        await asyncio.gather(*(touch() for _ in range(self.spec.concurrency)))

    # ----- measured part --------------------------------------------------------------------------
    async def _measure(self, deadline: float) -> None:
        self.t0 = perf_counter()
        workers = [asyncio.ensure_future(self._worker()) for _ in range(self.spec.concurrency)]
        ticker = asyncio.ensure_future(self._ticker())
        end = deadline
        if self.spec.duration_s is not None:
            end = min(end, self.t0 + self.spec.duration_s)
        try:
            await asyncio.wait_for(self.stop.wait(), timeout=max(0.0, end - perf_counter()))
        except TimeoutError:
            at_deadline = end >= deadline
            self._stop("deadline" if at_deadline else "duration")
        ticker.cancel()
        # Without per-chunk counts a cancelled request has no token count at all (the total only
        # comes at the end), so then the in-flight requests may finish; only their tokens up to t1
        # count.
        drain = self.stopped_by != "deadline" and not all(r.tokens_exact for r in self.records)
        if not drain:
            # now, before any await: nothing may keep streaming past t1 unnoticed
            for worker in workers:
                worker.cancel()
        await _cancel([ticker])
        if drain:
            _, pending = await asyncio.wait(workers, timeout=max(0.0, deadline - perf_counter()))
            workers = list(pending)
        await _cancel(workers)
        self._close_inflight(None if self.stopped_by != "deadline" and not drain
                             else ErrorKind.DEADLINE)
        if self.stopped_by == "requests" and self.records:
            # bench_serving's window, exactly over the recorded timestamps: first send to last
            # completion. (t0 was taken just before the workers started, the first request left a
            # little later.) The window is computed from the shifted records themselves, so the last
            # one ends exactly at its end.
            first = min(r.start_s for r in self.records)
            self.records = [dataclasses.replace(r, start_s=r.start_s - first) for r in self.records]
            self.window = max(r.start_s + r.end_s for r in self.records)
            self.t0 += first
            self.t1 = self.t0 + self.window
            scheduled = metrics.on_server_schedule(self.records)
            # a simulator: its schedule, not the host's delays (metrics.py)
            if scheduled is not None:
                self.client_aggregate = metrics.aggregate_tok_s(self.records, self.window)
                self.records, self.window = scheduled
                self.timebase = "server"
            return
        # A request that ended after t1 was still running at the end of the window: like one
        # cancelled there, its tokens count up to t1 but it is not a finished request of this phase.
        window = self.window = self.t1 - self.t0
        self.records = [dataclasses.replace(r, cancelled=True)
                        if r.error_kind is None and not r.cancelled and r.start_s + r.end_s > window
                        else r
                        for r in self.records]

    async def _worker(self) -> None:
        quota = self.spec.requests
        while not self.stop.is_set() and (quota is None or self.sent < quota):
            self.sent += 1
            index = self.next_index
            self.next_index += 1
            trace = Trace(index, self.limit)
            self.inflight[index] = trace
            try:
                body = self.body(index)
            # a prompt that cannot be encoded fails its request, not the phase
            except Exception as exc:
                trace.start = perf_counter()
                record = trace.record(self.t0, trace.start, ErrorKind.CLIENT,
                                      f"building the request: {exc!r}")
            else:
                record = await send(self.session, self.url, body, self.api, trace, self.timeouts,
                                    self.t0)
            del self.inflight[index]
            self.records.append(record)
            self._account(record)

    def _account(self, record: RequestRecord) -> None:
        self.finished += 1
        if record.error_kind is None:
            self.consecutive_failures = 0
            self.finished_tokens += record.output_tokens
        else:
            self.failed += 1
            self.consecutive_failures += 1
        if self.stop.is_set():
            return
        if self.spec.requests is not None and self.finished >= self.spec.requests:
            # every request of the phase has ended (no more are sent): the window closes at the last
            # completion (made exact over all records in _measure)
            self._stop("requests", at=self.t0 + record.start_s + record.end_s)
        elif self.consecutive_failures >= failure_limit(self.spec.concurrency):
            self._stop("failures")
        else:
            self._emit("measure")

    async def _ticker(self) -> None:
        last_check = perf_counter()
        while True:
            await asyncio.sleep(_TICK_S)
            self._emit("measure")
            now = perf_counter()
            if self.spec.ci_target is not None and now - last_check >= 2 * _TICK_S:
                last_check = now
                if self._ci_reached(now):
                    self._stop("ci")

    def _ci_reached(self, now: float) -> bool:
        if self.finished - self.failed < max(_CI_MIN_REQUESTS, self.spec.concurrency):
            return False
        arrivals, tokens = self._arrivals()
        self.ci_half_width = relative_half_width(arrivals, tokens, now - self.t0)
        return self.ci_half_width is not None and self.ci_half_width <= (self.spec.ci_target or 0.0)

    def _arrivals(self) -> tuple[np.ndarray, np.ndarray]:
        """Token arrival times (since t0) and counts, over finished and in-flight requests."""
        times: list[float] = []
        tokens: list[int] = []
        for r in self.records:
            if r.error_kind is None:
                times.extend(r.start_s + t for t in r.chunk_times_s)
                tokens.extend(r.chunk_tokens)
        for trace in list(self.inflight.values()):
            try:
                chunks = chunk_tokens(list(trace.times), list(trace.cumulative), list(trace.chars),
                                      trace.limit)
            except (UsageProblem, ValueError):
                continue
            times.extend(t - self.t0 for t in chunks.times)
            tokens.extend(chunks.tokens)
        return np.asarray(times), np.asarray(tokens, dtype=float)

    def _stop(self, reason: StopReason, at: float | None = None) -> None:
        if not self.stop.is_set():
            self.stopped_by = reason
            self.t1 = perf_counter() if at is None else at
            self.stop.set()

    def _close_inflight(self, kind: ErrorKind | None) -> None:
        now = perf_counter()
        for trace in self.inflight.values():
            if kind is None:
                self.records.append(trace.record(self.t0, now, cancelled=True))
            else:
                self.records.append(trace.record(self.t0, now, kind,
                                                 "still running when the phase deadline "
                                                 f"({self.spec.deadline_s:g} s) ended the phase"))
        self.inflight.clear()

    # ----- result ---------------------------------------------------------------------------------
    def _emit(self, stage: Literal["warmup", "measure", "done"]) -> None:
        if self.progress is None:
            return
        elapsed = (perf_counter() if stage != "done" else self.t1) - self.t0 if self.t0 else 0.0
        self.progress(PhaseProgress(self.spec.label, stage, self.finished, self.failed,
                                    self.spec.requests, elapsed, self.spec.duration_s,
                                    self.finished_tokens))

    def _result(self, warmup_failed: int, accept: AcceptLength) -> PhaseResult:
        records = sorted(self.records, key=lambda r: r.index)
        window = self.window
        ttft = metrics.Summary.of(metrics.ttft_s(records), 1000)
        itl = metrics.itl_summary(records, 1000)
        tpot = metrics.Summary.of(metrics.tpot_s(records), 1000)
        e2e = metrics.Summary.of(metrics.e2e_s(records), 1000)
        speeds = metrics.per_request_tok_s(records)
        if self.spec.ci_target is None or self.ci_half_width is None:
            arrivals, tokens = _window_arrivals(records, window)
            self.ci_half_width = relative_half_width(arrivals, tokens, window)
        speed_sample = MeanSample.of(speeds)
        aggregate = aggregate_sample(records, window)
        speed_ci, aggregate_ci = speed_sample.interval(), aggregate.interval()
        latency_ci = latency_intervals(records)
        return PhaseResult(
            spec=self.spec,
            stopped_by=self.stopped_by or "requests",
            duration_s=window,
            completed=sum(1 for r in records if r.ok),
            failed=sum(1 for r in records if r.error_kind is not None),
            cancelled=sum(1 for r in records if r.cancelled),
            errors=metrics.errors_by_kind(records),
            output_tokens=metrics.tokens_in_window(records, window),
            tokens_exact=all(r.tokens_exact for r in records),
            ci_half_width=self.ci_half_width,
            warmup_failed=warmup_failed,
            accept_length_source=accept.source,
            per_request_tok_s_mean=float(np.mean(speeds)) if speeds else None,
            per_request_tok_s_median=float(np.median(speeds)) if speeds else None,
            aggregate_tok_s=metrics.aggregate_tok_s(records, window),
            request_rate=metrics.request_rate(records, window),
            accept_length=accept.value,
            tokens_per_chunk=metrics.tokens_per_chunk(records),
            achieved_concurrency=metrics.achieved_concurrency(records, window),
            error_rate=metrics.error_rate(records),
            ttft_mean_ms=ttft.mean, ttft_p50_ms=ttft.p50, ttft_p90_ms=ttft.p90,
            ttft_p99_ms=ttft.p99,
            itl_mean_ms=itl.mean, itl_p50_ms=itl.p50, itl_p90_ms=itl.p90, itl_p99_ms=itl.p99,
            tpot_mean_ms=tpot.mean, tpot_p50_ms=tpot.p50, tpot_p90_ms=tpot.p90,
            tpot_p99_ms=tpot.p99,
            e2e_mean_ms=e2e.mean, e2e_p50_ms=e2e.p50, e2e_p90_ms=e2e.p90, e2e_p99_ms=e2e.p99,
            per_request_tok_s_mean_ci=(speed_ci.low, speed_ci.high) if speed_ci else None,
            aggregate_tok_s_ci=(aggregate_ci.low, aggregate_ci.high) if aggregate_ci else None,
            ttft_p50_ms_ci=latency_ci.get("ttft_p50_ms"),
            ttft_p99_ms_ci=latency_ci.get("ttft_p99_ms"),
            itl_mean_ms_ci=latency_ci.get("itl_mean_ms"),
            samples={"per_request_tok_s_mean": speed_sample.to_dict(),
                     "aggregate_tok_s": aggregate.to_dict()},
            timebase=self.timebase,
            client_aggregate_tok_s=self.client_aggregate,
            failure=self.overload.failure,
            failure_message=self.overload.message,
            simulator_dropped_share=self.overload.dropped_share,
            per_request=(paired.speeds_of(records) if self.spec.concurrency == 1
                         else paired.aggregate_parts_of(records, window)).to_dict(),
            records=tuple(records),
        )


def _window_arrivals(records: list[RequestRecord], window: float) -> tuple[np.ndarray, np.ndarray]:
    times: list[float] = []
    tokens: list[int] = []
    for r in records:
        if r.error_kind is None:
            for t, n in zip(r.chunk_times_s, r.chunk_tokens, strict=True):
                if r.start_s + t <= window:
                    times.append(r.start_s + t)
                    tokens.append(n)
    return np.asarray(times), np.asarray(tokens, dtype=float)


async def _cancel(tasks: Collection[asyncio.Future[None]]) -> None:
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
