"""Which connections count as primed for a burst (tuner/simulator/bursts.py)."""

from __future__ import annotations

import asyncio

import pytest

from tuner.simulator import bursts
from tuner.simulator.bursts import PrimedConnections


class _Transport(asyncio.BaseTransport):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def is_closing(self) -> bool:
        return self.closed


def test_a_connection_is_primed_until_used_closed_or_stale(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> list[bool]:
        primed = PrimedConnections()
        used, closed, stale = _Transport(), _Transport(), _Transport()
        seen = [primed.pending()]  # nothing primed yet
        for transport in (used, closed, stale):
            primed.prime(transport)
        primed.prime(None)  # a request without a transport (already gone) changes nothing
        seen.append(primed.pending())
        primed.used(used)
        closed.closed = True
        seen.append(primed.pending())  # `stale` still is
        monkeypatch.setattr(bursts, "PRIMED_FOR_S", 0.0)
        seen.append(primed.pending())
        return seen

    assert asyncio.run(run()) == [False, True, True, False]


def test_closed_connections_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server polled on a new connection each time holds on to none of the closed ones."""

    async def run() -> int:
        primed = PrimedConnections()
        for _ in range(100):
            transport = _Transport()
            primed.prime(transport)
            transport.closed = True
        return len(primed)

    assert asyncio.run(run()) == 1
