"""A burst sent over connections opened beforehand is prefilled together even when the client
stalls between its sends longer than the arrival settle (a busy host): the first wave's TTFT does
not depend on the client's timing (tuner/simulator/bursts.py).

Through the real server: its own process, aiohttp on both sides, the stamps a load generator reads.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import aiohttp
import pytest

from objectives.client import SCHEDULE_KEY
from tests.integration.simulator.conftest import SPEC
from tuner.simulator.clock import ARRIVAL_SETTLE_MAX_S, ARRIVAL_SETTLE_S
from tuner.simulator.process import running_simulator

BURST = 8
#: the client's stall after its first send: far longer than the settle's quiet window
STALL_S = 10 * ARRIVAL_SETTLE_S
BODY = {"text": "Tell a story about a lighthouse keeper.", "stream": True,
        "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}}


async def _first_stamp(session: aiohttp.ClientSession, url: str) -> list[float]:
    async with session.post(f"{url}/generate", json=BODY) as response:
        async for line in response.content:
            if line.startswith(b"data: {"):
                stamp: list[float] = json.loads(line[6:])[SCHEDULE_KEY]
                return stamp
    raise AssertionError("no event")


async def _burst(url: str) -> tuple[list[list[float]], float]:
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=timeout) as session:

        async def touch() -> None:
            async with session.get(f"{url}/v1/models") as response:
                await response.read()

        await asyncio.gather(*(touch() for _ in range(BURST)))  # BURST connections, kept open
        first = asyncio.ensure_future(_first_stamp(session, url))
        await asyncio.sleep(0)  # its request leaves
        sent = time.monotonic()
        await asyncio.sleep(STALL_S)
        rest = [asyncio.ensure_future(_first_stamp(session, url)) for _ in range(BURST - 1)]
        await asyncio.sleep(0)
        gap = time.monotonic() - sent
        return list(await asyncio.gather(first, *rest)), gap


def test_a_burst_on_connections_opened_before_is_prefilled_together(tmp_path: Path) -> None:
    with running_simulator([*SPEC, "--max-running-requests", "16"], time_scale=25.0, seed=0,
                           log_path=tmp_path / "sim.log") as sim:
        stamps, gap = asyncio.run(_burst(sim.url))
    if gap >= ARRIVAL_SETTLE_MAX_S:
        pytest.skip(f"the host stalled this client {gap:.3f} s, past the settle's bound")
    assert len({tuple(s) for s in stamps}) == 1, stamps  # one arrival, one first chunk
