"""Named fault points for the fault-injection suite (tests/faults/): ``fault_point("after_ask")``.

``SPECTUNE_FAULT`` lists faults as ``POINT[@N]:ACTION`` separated by commas, e.g.
``after_ask@2:kill``: at the N-th time (default the first) this process passes ``POINT``, do ACTION
— ``kill`` (SIGKILL itself: a power loss at exactly that line), ``term`` / ``int`` (a SIGTERM /
Ctrl-C arriving there), ``raise`` (a crash) or ``wait``: stop there until a signal comes from
outside (at most ``WAIT_S``), so a test can send a real SIGINT or SIGTERM at exactly that stage
without timing anything. A ``wait`` announces itself by appending the point's name to the file
``SPECTUNE_FAULT_REACHED`` names; removing that file lets it go on without a signal (a test that
breaks the storage while the tuner stands still there). The variables are read once at import;
unset, ``fault_point`` is one dict lookup on an empty dict.
"""

from __future__ import annotations

import os
import signal
import time

from tuner.core import interrupts

_ACTIONS = {"kill": signal.SIGKILL, "term": signal.SIGTERM, "int": signal.SIGINT}
#: The longest a ``wait`` waits: a test that never sends its signal fails on the tuner's own ending,
#: not a hang.
WAIT_S = 120.0


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


def reload() -> None:
    """Read ``SPECTUNE_FAULT`` again and start counting afresh: for a process forked after the
    import (the fault suite's fork server, tests/faults/forkserver.py)."""
    _faults.clear()
    _faults.update(_parse(os.environ.get("SPECTUNE_FAULT", "")))
    _passed.clear()


def fault_point(name: str) -> None:
    """Do the fault ``SPECTUNE_FAULT`` names for ``name`` when this is its turn; nothing
    otherwise."""
    if not _faults or name not in _faults:
        return
    _passed[name] = _passed.get(name, 0) + 1
    nth, action = _faults[name]
    if _passed[name] != nth:
        return
    if action == "raise":
        raise InjectedFault(f"fault injected at {name}")
    if action == "wait":
        _wait(name)
        return
    os.kill(os.getpid(), _ACTIONS[action])


def _wait(name: str) -> None:
    """Until a signal arrives: the tuner's handler raises here (the signal lands at this point) or,
    inside a ``deferred()`` cleanup, only counts it (the cleanup then goes on, as it would for a
    real second signal)."""
    seen = interrupts.received()
    reached = os.environ.get("SPECTUNE_FAULT_REACHED")
    if reached:
        with open(reached, "a") as file:
            file.write(f"{name}\n")
    deadline = time.monotonic() + WAIT_S
    while interrupts.received() == seen and time.monotonic() < deadline:
        if reached and not os.path.exists(reached):
            return  # released
        time.sleep(0.01)
