"""``run_benchmark``: every phase of a ``BenchmarkSpec`` against one server, in order. The one entry point
that ``spectune bench`` and every trial call.

Asynchronous at the core (``run_benchmark_async``) with a synchronous wrapper. Raises only for a workload
that cannot be built (``WorkloadError``: unreadable prompt file); anything the server does ends up in the
results as data.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from objectives.api import APIS
from objectives.client import Timeouts
from objectives.phase import PhaseRunner, ProgressCallback
from objectives.prompts import load_source
from objectives.results import BenchmarkResult, PhaseResult
from objectives.spec import BenchmarkSpec, WorkloadSpec

#: Phase k draws prompts from index k·PHASE_INDEX_STRIDE on: the same prompts in every trial (comparable),
#: different prompts per phase (a synthetic prompt is never a prefix-cache hit from an earlier phase).
PHASE_INDEX_STRIDE = 1_000_000


def run_benchmark(base_url: str, spec: BenchmarkSpec, progress: ProgressCallback | None = None) -> BenchmarkResult:
    """Synchronous wrapper of ``run_benchmark_async`` (must not be called from a running event loop)."""
    return asyncio.run(run_benchmark_async(base_url, spec, progress))


async def run_benchmark_async(base_url: str, spec: BenchmarkSpec,
                              progress: ProgressCallback | None = None) -> BenchmarkResult:
    workload = spec.workload
    source = load_source(workload)  # before any request: a bad prompt file is a usage error
    api = APIS[workload.api]
    timeouts = timeouts_for(workload)
    base_url = base_url.rstrip("/")
    # No connection limit: the phase's concurrency is the limit. Keep-alive connections are reused between
    # a worker's consecutive requests, so connection setup is not part of a request's TTFT.
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        model = workload.model
        if model is None and workload.api != "generate":
            model = await discover_model(session, base_url, timeouts)
        phases: list[PhaseResult] = []
        for number, phase in enumerate(spec.phases):
            def body(index: int, _model: str | None = model) -> bytes:
                return api.body(source.prompt(index), workload, _model)

            runner = PhaseRunner(session, base_url, api, body, phase, timeouts, progress,
                                 first_index=number * PHASE_INDEX_STRIDE)
            phases.append(await runner.run())
    return BenchmarkResult(base_url=base_url, spec=spec, model=model, phases=tuple(phases))


def timeouts_for(workload: WorkloadSpec) -> Timeouts:
    return Timeouts(connect_s=workload.connect_timeout_s,
                    stall_s=min(workload.stall_timeout_s, workload.request_timeout_s),
                    request_s=workload.request_timeout_s)


async def discover_model(session: aiohttp.ClientSession, base_url: str, timeouts: Timeouts) -> str | None:
    """The first model id of ``/v1/models``; None if the server does not say (requests are then sent
    without ``model``, which SGLang accepts, and any other server's refusal is recorded per request)."""
    timeout = aiohttp.ClientTimeout(total=timeouts.connect_s + 10, sock_connect=timeouts.connect_s)
    try:
        async with session.get(f"{base_url}/v1/models", timeout=timeout) as response:
            if response.status != 200:
                return None
            payload: Any = await response.json(content_type=None)
        model = payload["data"][0]["id"]
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    return model if isinstance(model, str) else None
