"""Connections a client opened for a burst it has not sent yet: what the engine's arrival settle
waits for.

A closed-loop client that measures C concurrent requests opens its C connections beforehand (a
cheap GET on each; spectune's load generator does, objectives/phase.py) and then sends C requests
at once. At a high time scale the engine settles a burst before its first prefill, waiting for a
moment without arrivals (``clock.ARRIVAL_SETTLE_S``). On a busy host the client can be descheduled
for longer than that between two sends of one burst — after its very first send, at worst — and
the first prefill then holds one request instead of C: its TTFT drops from the whole burst's
prefill to one request's, and a TTFT percentile that sits between the burst and the replacements
(the p50 of a C=64 phase of 128 requests) moved by up to 60 % with the host's load.

A connection is *primed* from an answered GET until it carries another request, is closed or
``PRIMED_FOR_S`` passed; while any is, the settle keeps waiting (still bounded by
``ARRIVAL_SETTLE_MAX_S``), at every time scale: at 1, where there is no quiet window, a stalled
client split the first wave as well. A client that opens a connection per request (SGLang's
bench_serving) primes none and sees the settle as before (none at all at time scale 1).
"""

from __future__ import annotations

import asyncio

#: How long a connection stays primed after its GET (real seconds): a client opening connections
#: for a burst sends it within milliseconds; a connection left idle after a one-off GET (a model
#: lookup, a readiness check) stops counting soon after.
PRIMED_FOR_S = 0.5


class PrimedConnections:
    """Connections (their transports) whose last request was an answered GET, with when."""

    def __init__(self) -> None:
        self._since: dict[asyncio.BaseTransport, float] = {}

    def prime(self, transport: asyncio.BaseTransport | None) -> None:
        if transport is not None:
            self._prune()  # a server polled on new connections keeps no closed ones
            self._since[transport] = asyncio.get_running_loop().time()

    def used(self, transport: asyncio.BaseTransport | None) -> None:
        """A request arrived on this connection: it is busy (a burst's send came, or a GET that
        primes it again once answered)."""
        if transport is not None:
            self._since.pop(transport, None)

    def pending(self) -> bool:
        """Is some connection still primed (open, GET less than PRIMED_FOR_S ago)?"""
        self._prune()
        return bool(self._since)

    def __len__(self) -> int:
        """Connections tracked (primed when last pruned)."""
        return len(self._since)

    def _prune(self) -> None:
        now = asyncio.get_running_loop().time()
        self._since = {t: at for t, at in self._since.items()
                       if now - at < PRIMED_FOR_S and not t.is_closing()}
