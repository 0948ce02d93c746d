"""``run_benchmark``: every phase of a ``BenchmarkSpec`` against one server, in order — what
``spectune bench`` calls; ``run_phase``: one of those phases alone, exactly as ``run_benchmark``
runs it — what a trial calls, so that it can stop between phases.

Asynchronous at the core (``*_async``) with synchronous wrappers. Raises only for a workload
that cannot be built (``WorkloadError``: unreadable prompt file); anything the server does ends up
in the results as data.
"""

from __future__ import annotations

import asyncio
import gc
import math
from typing import Any

import aiohttp

from objectives.api import APIS
from objectives.client import Timeouts
from objectives.phase import PhaseRunner
from objectives.progress import ProgressCallback
from objectives.prompts import load_source
from objectives.results import BenchmarkResult, PhaseResult
from objectives.spec import BenchmarkSpec, WorkloadSpec

#: Phase k draws prompts from index k·PHASE_INDEX_STRIDE on: the same prompts in every trial
#: (comparable), different prompts per phase (a synthetic prompt is never a prefix-cache hit from an
#: earlier phase).
PHASE_INDEX_STRIDE = 1_000_000


def run_benchmark(base_url: str, spec: BenchmarkSpec,
                  progress: ProgressCallback | None = None) -> BenchmarkResult:
    """Synchronous wrapper of ``run_benchmark_async`` (must not be called from a running event
    loop)."""
    return asyncio.run(run_benchmark_async(base_url, spec, progress))


def run_phase(base_url: str, spec: BenchmarkSpec, phase_index: int,
              progress: ProgressCallback | None = None) -> PhaseResult:
    """Only ``spec.phases[phase_index]``, exactly as ``run_benchmark`` runs it (same prompts), so
    that a trial can stop between phases. Synchronous; must not be called from a running event
    loop."""
    return asyncio.run(run_phase_async(base_url, spec, phase_index, progress))


async def run_benchmark_async(base_url: str, spec: BenchmarkSpec,
                              progress: ProgressCallback | None = None) -> BenchmarkResult:
    async with _Bench(base_url, spec, progress) as bench:
        phases = [await bench.phase(i) for i in range(len(spec.phases))]
        assert bench.session is not None
        scale = await discover_time_scale(bench.session, bench.base_url, bench.timeouts)
    return BenchmarkResult(base_url=bench.base_url, spec=spec, model=bench.model,
                           phases=tuple(phases), time_scale=scale)


async def run_phase_async(base_url: str, spec: BenchmarkSpec, phase_index: int,
                          progress: ProgressCallback | None = None) -> PhaseResult:
    if not 0 <= phase_index < len(spec.phases):
        raise IndexError(f"phase {phase_index} of a benchmark with {len(spec.phases)} phases")
    async with _Bench(base_url, spec, progress) as bench:
        return await bench.phase(phase_index)


class _Bench:
    """One HTTP session, the prompts and the model name shared by the phases of one benchmark."""

    def __init__(self, base_url: str, spec: BenchmarkSpec,
                 progress: ProgressCallback | None) -> None:
        self.base_url = base_url.rstrip("/")
        self.spec = spec
        self.progress = progress
        # before any request: a bad prompt file is a usage error
        self.source = load_source(spec.workload)
        self.api = APIS[spec.workload.api]
        self.timeouts = timeouts_for(spec.workload)
        self.model: str | None = spec.workload.model
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> _Bench:
        # What the process holds before the measurement (a tuner's imports, its study) leaves the
        # collector's generations: a full collection over that heap stops the closed loop's event
        # loop for a long moment, and a server the client stops feeding measures a smaller batch (a
        # tune process's first C=64 phase fell to a running batch of 2-9 of 64 mid-phase). Only
        # objects created during the benchmark are scanned; __aexit__ gives the rest back to the
        # collector (nothing is kept alive for good). No connection limit: the phase's concurrency
        # is the limit. Keep-alive connections are reused between a worker's consecutive requests,
        # so connection setup is not part of every TTFT.
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        if self.model is None and self.spec.workload.api != "generate":
            self.model = await discover_model(self.session, self.base_url, self.timeouts)
        gc.freeze()
        return self

    async def __aexit__(self, *exc: object) -> None:
        gc.unfreeze()
        assert self.session is not None
        await self.session.close()

    async def phase(self, index: int) -> PhaseResult:
        assert self.session is not None
        workload, source, api, model = self.spec.workload, self.source, self.api, self.model

        def body(request: int) -> bytes:
            return api.body(source.prompt(request), workload, model, request)

        runner = PhaseRunner(self.session, self.base_url, api, body, self.spec.phases[index],
                             self.timeouts, self.progress, first_index=index * PHASE_INDEX_STRIDE,
                             max_tokens=workload.max_tokens)
        return await runner.run()


def timeouts_for(workload: WorkloadSpec) -> Timeouts:
    return Timeouts(connect_s=workload.connect_timeout_s,
                    stall_s=min(workload.stall_timeout_s, workload.request_timeout_s),
                    request_s=workload.request_timeout_s)


async def discover_model(session: aiohttp.ClientSession, base_url: str,
                         timeouts: Timeouts) -> str | None:
    """The first model id of ``/v1/models``; None if the server does not say (requests are then sent
    without ``model``, which SGLang accepts, and any other server's refusal is recorded per
    request)."""
    timeout = aiohttp.ClientTimeout(total=timeouts.connect_s + 10, sock_connect=timeouts.connect_s)
    try:
        async with session.get(f"{base_url}/v1/models", timeout=timeout) as response:
            if response.status != 200:
                return None
            payload: Any = await response.json(content_type=None)
        model = payload["data"][0]["id"]
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError, KeyError, IndexError,
            TypeError):
        return None
    return model if isinstance(model, str) else None


async def discover_time_scale(session: aiohttp.ClientSession, base_url: str,
                              timeouts: Timeouts) -> float | None:
    """The ``time_scale`` a simulator reports in its server info (``/server_info``, or the older
    ``/get_server_info``; top level, ``internal_states[0]`` or spectune's ``simulator`` section), or
    None when the server does not say — a real SGLang server never does. Figures measured at a scale
    s ≠ 1 are s times too fast: whoever shows them must say so (``PhaseResult.at_time_scale``
    converts them)."""
    timeout = aiohttp.ClientTimeout(total=timeouts.connect_s + 10, sock_connect=timeouts.connect_s)
    for path in ("/server_info", "/get_server_info"):
        try:
            async with session.get(f"{base_url}{path}", timeout=timeout) as response:
                if response.status != 200:
                    continue
                info: Any = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
            return None
        if not isinstance(info, dict):
            return None
        states = info.get("internal_states")
        first = (states[0] if isinstance(states, list) and states and isinstance(states[0], dict)
                 else {})
        # spectune's simulator says it in its own section ("simulator": its schedule's state),
        # beside SGLang's keys
        own = info.get("simulator")
        own = own if isinstance(own, dict) else {}
        value = info.get("time_scale", first.get("time_scale", own.get("time_scale")))
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value) if math.isfinite(value) and value > 0 else None
    return None
