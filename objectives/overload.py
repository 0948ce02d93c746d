"""A phase measured while the simulator could not keep its schedule fails as
``simulator-overloaded``.

The simulator accounts for its schedule in ``/server_info`` under ``simulator`` (not an SGLang
field; see docs/simulator.md): ``busy_s`` real seconds spent on scheduled work and ``dropped_s`` of
them given up because the process was late beyond its catch-up tolerance. The phase reads the
account before and after its measured part; the share Δdropped / Δbusy says how much of the phase
the simulator ran slower than the model.

How much is too much depends on what the figures were computed from (``PhaseResult.timebase``):

* ``client`` (arrival times at the load generator): every given-up second is a second the modelled
  server did not run at its speed, so a few per cent already distort the figures —
  ``MAX_DROPPED_SHARE["client"]``;
* ``server`` (the simulator's own schedule stamps): given-up lag does not enter the figures —
  measured, the demo baseline's C=64 within 0.4 % of the virtual-clock schedule with 37 % given up
  at 10x and 83 % at 50x (docs/benchmarks.md) — so nothing is refused; the share is still reported
  (``simulator_dropped_share``).

A phase without a successful request is not judged: its error rate already says it measured nothing.

A real SGLang server has no such account: nothing is checked and nothing fails. Failing is data,
like a request's ``ErrorKind``: the phase keeps its figures for inspection and says why they are not
to be used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal

import aiohttp

#: The failure class of such a phase (what a trial stores as its ``failure_class``).
SIMULATOR_OVERLOADED: Final = "simulator-overloaded"
#: The largest share of the measured part's busy time the simulator may give up, by timebase (None:
#: any).
MAX_DROPPED_SHARE: Final[dict[str, float | None]] = {"client": 0.02, "server": None}
_TIMEOUT = aiohttp.ClientTimeout(total=10)


@dataclass(frozen=True)
class ScheduleAccount:
    busy_s: float
    dropped_s: float


def parse_account(info: Any) -> ScheduleAccount | None:
    """The ``simulator`` account of a server-info answer, or None (a real server, or numbers that
    are not)."""
    state = info.get("simulator") if isinstance(info, dict) else None
    if not isinstance(state, dict):
        return None
    values = [state.get("busy_s"), state.get("dropped_s")]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
               and v >= 0
               for v in values):
        return None
    return ScheduleAccount(float(values[0]), float(values[1]))  # type: ignore[arg-type]


async def read_account(session: aiohttp.ClientSession, base_url: str) -> ScheduleAccount | None:
    try:
        async with session.get(f"{base_url}/server_info", timeout=_TIMEOUT) as response:
            if response.status != 200:
                return None
            info: Any = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
        return None
    return parse_account(info)


@dataclass(frozen=True)
class Overload:
    dropped_share: float | None  # Δdropped / Δbusy over the measured part; None without an account
    failure: str | None  # SIMULATOR_OVERLOADED or None
    message: str | None


def judge(before: ScheduleAccount | None, after: ScheduleAccount | None,
          timebase: Literal["client", "server"], measured: bool = True) -> Overload:
    """``measured``: the phase had a successful request (else only the share is reported)."""
    if before is None or after is None:
        return Overload(None, None, None)
    busy = after.busy_s - before.busy_s
    dropped = after.dropped_s - before.dropped_s
    if busy <= 0 or dropped < 0:  # nothing scheduled, or another server answered the second time
        return Overload(None, None, None)
    share = min(1.0, dropped / busy)
    limit = MAX_DROPPED_SHARE[timebase]
    if limit is None or share <= limit or not measured:
        return Overload(share, None, None)
    return Overload(share, SIMULATOR_OVERLOADED,
                    f"the simulator gave up {dropped:.2f} s of its schedule ({share:.0%} of "
                    f"{busy:.2f} s busy, limit {limit:.0%} for figures on the {timebase}'s clock): "
                    "this machine's free CPU does not sustain its time scale; lower the target's "
                    "time_scale or free the CPU")
