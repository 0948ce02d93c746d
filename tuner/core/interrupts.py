"""Ctrl-C and SIGTERM while tuning: stop the running trial now, record it, restore the target.

The signal handler raises ``Interrupted`` wherever the main thread is, so a long readiness wait or benchmark
phase stops at once. A raise can land where Python cannot deliver it — inside a weakref callback or a
destructor ("Exception ignored in …") — so the handler also remembers the signal, and the study loop and the
measurer call ``check()`` at every safe point (between trials, around each phase): an interrupt is never lost,
only delayed to the next such point. Tracebacks that asyncio or the interpreter would print for an interrupt
they swallowed are dropped: an interrupt is reported in one line, by the CLI.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from tuner.core.errors import Interrupted

_pending: list[int] = []


class _DropTracebacksOf(logging.Filter):
    def __init__(self, errors: tuple[type[BaseException], ...]) -> None:
        super().__init__()
        self.errors = errors

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, self.errors)


def silence_tracebacks(logger_name: str, *errors: type[BaseException]) -> None:
    """Drop ``logger_name``'s records that carry one of ``errors`` (idempotent): expected ways for a trial to
    end are reported in one line elsewhere, and a traceback in the output reads like a crash."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, _DropTracebacksOf) and f.errors == errors for f in logger.filters):
        logger.addFilter(_DropTracebacksOf(errors))


# For good, not only inside ``interruptible()``: asyncio reports a task whose interrupt nobody retrieved when the
# task is garbage-collected, which can be after the study has already ended.
silence_tracebacks("asyncio", Interrupted)


def check() -> None:
    """Raise the interrupt that arrived earlier and could not be delivered where it landed."""
    if _pending:
        raise Interrupted(_pending[0])


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C: the running trial stops now, is recorded, and the target is restored."""
    def handler(signum: int, _frame: FrameType | None) -> None:
        _pending.append(signum)
        raise Interrupted(signum)

    previous_hook = sys.unraisablehook

    def unraisable(info: Any) -> None:
        if not isinstance(info.exc_value, Interrupted):
            previous_hook(info)

    sys.unraisablehook = unraisable
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        sys.unraisablehook = previous_hook
        _pending.clear()
