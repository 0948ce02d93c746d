"""The speculative accept length over one phase, read from the server.

Preferred: Prometheus counters (``--enable-metrics``). Accept length over the phase =
Δ ``sglang:generation_tokens_total`` ÷ Δ ``sglang:spec_verify_calls_total`` between the start and
the end of the measured part: tokens produced per verify forward, bonus token included. Exact,
windowed, needs no flush. Fallback: ``/flush_cache`` before the measured part (the server is idle
then, which the flush requires), and ``internal_states[0].avg_spec_accept_length`` from
``/server_info`` after it. That average is cumulative since the last flush, and is only updated
every ``--decode-log-interval`` steps.

A probe never raises: a server without either source yields ``value=None`` and says so in
``source``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

GENERATION_TOKENS = "sglang:generation_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"
_PROBE_TIMEOUT = aiohttp.ClientTimeout(total=10)
#: One verify forward accepts at most its draft tokens + 1; no speculative setup drafts anywhere
#: near this.
MAX_ACCEPT_LENGTH = 1024.0

Source = Literal["metrics", "server_info", "server_info_unflushed", "unavailable"]


@dataclass(frozen=True)
class AcceptLength:
    value: float | None
    source: Source


def parse_counters(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """The value of each named series in a Prometheus text exposition, summed over its label sets
    (one per model or DP rank). Names that do not appear are absent from the result."""
    wanted = set(names)
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        if brace >= 0:
            name = line[:brace]
            rest = line[line.rfind("}") + 1:]
        else:
            name, _, rest = line.partition(" ")
        if name not in wanted:
            continue
        fields = rest.split()
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        if math.isfinite(value):
            totals[name] = totals.get(name, 0.0) + value
    return totals


def plausible(value: float) -> float | None:
    """``value`` if it can be an accept length (tokens per verify forward: finite and positive),
    else None. JSON and Prometheus text both carry NaN and ±inf; a server may also send a negative
    or huge figure."""
    if not math.isfinite(value) or value <= 0 or value > MAX_ACCEPT_LENGTH:
        return None
    return value


class AcceptLengthProbe:
    """``await begin()`` before the measured part (server idle), ``await end()`` after it."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")
        self._baseline: dict[str, float] | None = None
        self._flushed = False

    async def begin(self) -> None:
        counters = await self._counters()
        if counters is not None and VERIFY_CALLS in counters and GENERATION_TOKENS in counters:
            self._baseline = counters
            return
        self._flushed = await self._flush()

    async def end(self) -> AcceptLength:
        if self._baseline is not None:
            counters = await self._counters()
            if (counters is None or VERIFY_CALLS not in counters
                or GENERATION_TOKENS not in counters):
                return AcceptLength(None, "unavailable")
            verify = counters[VERIFY_CALLS] - self._baseline[VERIFY_CALLS]
            tokens = counters[GENERATION_TOKENS] - self._baseline[GENERATION_TOKENS]
            # counters that went down (a restart) or a ratio below 0 say nothing about acceptance
            value = plausible(tokens / verify) if verify > 0 else None
            return AcceptLength(value, "metrics" if value is not None else "unavailable")
        value = await self._server_info_accept_length()
        if value is None:
            return AcceptLength(None, "unavailable")
        return AcceptLength(value, "server_info" if self._flushed else "server_info_unflushed")

    async def _counters(self) -> dict[str, float] | None:
        text = await self._get_text("/metrics")
        return None if text is None else parse_counters(text, (GENERATION_TOKENS, VERIFY_CALLS))

    async def _flush(self) -> bool:
        try:
            async with self.session.post(f"{self.base_url}/flush_cache",
                                         timeout=_PROBE_TIMEOUT) as response:
                await response.read()
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError, OSError):
            return False

    async def _server_info_accept_length(self) -> float | None:
        try:
            async with self.session.get(f"{self.base_url}/server_info",
                                        timeout=_PROBE_TIMEOUT) as response:
                if response.status != 200:
                    return None
                info: Any = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
            return None
        try:
            value = info["internal_states"][0]["avg_spec_accept_length"]
        except (KeyError, IndexError, TypeError):
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return plausible(float(value))

    async def _get_text(self, path: str) -> str | None:
        try:
            async with self.session.get(f"{self.base_url}{path}",
                                        timeout=_PROBE_TIMEOUT) as response:
                if response.status != 200:
                    return None
                return await response.text()
        except (aiohttp.ClientError, TimeoutError, OSError, UnicodeDecodeError):
            return None
