"""Named fault points for the fault-injection suite (tests/faults/): ``fault_point("after_ask")``.

``SPECTUNE_FAULT`` lists faults as ``POINT[@N]:ACTION`` separated by commas, e.g. ``after_ask@2:kill``: at the
N-th time (default the first) this process passes ``POINT``, do ACTION — ``kill`` (SIGKILL itself: a power
loss at exactly that line), ``term`` / ``int`` (a SIGTERM / Ctrl-C arriving there) or ``raise`` (a crash). The
variable is read once at import; unset, ``fault_point`` is one dict lookup on an empty dict.
"""

from __future__ import annotations

import os
import signal

_ACTIONS = {"kill": signal.SIGKILL, "term": signal.SIGTERM, "int": signal.SIGINT}


class InjectedFault(Exception):
    """``raise``: an unexpected error at a fault point."""


def _parse(text: str) -> dict[str, tuple[int, str]]:
    faults: dict[str, tuple[int, str]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        where, _, action = item.partition(":")
        point, _, nth = where.partition("@")
        faults[point] = (int(nth) if nth else 1, action or "kill")
    return faults


_faults = _parse(os.environ.get("SPECTUNE_FAULT", ""))
_passed: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Do the fault ``SPECTUNE_FAULT`` names for ``name`` when this is its turn; nothing otherwise."""
    if not _faults or name not in _faults:
        return
    _passed[name] = _passed.get(name, 0) + 1
    nth, action = _faults[name]
    if _passed[name] != nth:
        return
    if action == "raise":
        raise InjectedFault(f"fault injected at {name}")
    os.kill(os.getpid(), _ACTIONS[action])
