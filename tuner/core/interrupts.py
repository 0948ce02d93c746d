"""Ctrl-C, SIGTERM and SIGHUP while tuning: stop the running trial now, record it, restore the
target.

The signal handler raises ``Interrupted`` wherever the main thread is, so a long readiness wait or
benchmark phase stops at once. A raise can land where Python cannot deliver it — inside a weakref
callback or a destructor ("Exception ignored in …") — so the handler also remembers the signal, and
the study loop and the measurer call ``check()`` at every safe point (between trials, around each
phase): an interrupt is never lost, only delayed to the next such point. Tracebacks that asyncio or
the interpreter would print for an interrupt they swallowed are dropped: an interrupt is reported in
one line, by the CLI.

Two narrower tools: ``exit_while_starting`` for the program's first second (its modules importing:
nothing to stop yet, so one line and exit), and ``deferrable()`` / ``defer_from_here()`` for a step
whose end lies in a library's hands (a trial's result stored by Optuna's ``tell``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any

from tuner.core.errors import Interrupted, chain_of

_pending: list[int] = []


class _DropTracebacksOf(logging.Filter):
    def __init__(self, errors: tuple[type[BaseException], ...]) -> None:
        super().__init__()
        self.errors = errors

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        # Also an error raised while one of ``errors`` unwound (a library closing its cursor on a
        # database that an interrupt had just closed): the interrupt is the story, told in one line
        # elsewhere.
        return error is None or not any(isinstance(e, self.errors) for e in chain_of(error))


def silence_tracebacks(logger_name: str, *errors: type[BaseException]) -> None:
    """Drop ``logger_name``'s records that carry one of ``errors`` (idempotent): expected ways for a
    trial to end are reported in one line elsewhere, and a traceback in the output reads like a
    crash."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, _DropTracebacksOf) and f.errors == errors for f in logger.filters):
        logger.addFilter(_DropTracebacksOf(errors))


# For good, not only inside ``interruptible()``: asyncio reports a task whose interrupt nobody
# retrieved when the task is garbage-collected, which can be after the study has already ended.
silence_tracebacks("asyncio", Interrupted)


def _exit_now(signum: int, _frame: FrameType | None) -> None:
    # Nothing has started that needs stopping, and raising would print a traceback from whatever
    # module was importing: say it, end here. What the program wrote so far goes out first (best
    # effort: the signal may have landed inside a write to the same stream).
    for stream in (sys.stdout, sys.stderr):
        # a reentrant write, a closed stream: the line below still goes out
        with suppress(Exception):
            stream.flush()
    os.write(2, f"error: interrupted by {signal.Signals(signum).name}\n".encode())
    os._exit(128 + signum)


def exit_while_starting(*, program: str, module: str) -> None:
    """When this process is ``program`` (its console script, or ``python -m module``): from now
    until a command opens ``interruptible()`` — and again after it, on the way out — a SIGINT,
    SIGTERM or SIGHUP ends the process at once with one ``error:`` line and exit 128 + the signal. A
    library import of the package (tests, a notebook) keeps its own handlers."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    as_module = "-m" in argv[:-1] and argv[argv.index("-m") + 1] == module
    if os.path.basename(sys.argv[0]) != program and not as_module:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    for s in _handled():
        signal.signal(s, _exit_now)


def _handled() -> list[signal.Signals]:
    """Ctrl-C, SIGTERM, and SIGHUP — the terminal of an overnight study closed, an SSH session
    dropped: it would otherwise end the tuner with its server running — unless SIGHUP was ignored
    when the process started (``nohup``): that choice stands. (SIGINT and SIGTERM are always
    handled: a shell ignores SIGINT for a job it starts in the background, and the tuner must still
    stop cleanly when asked to.)"""
    hangup = [signal.SIGHUP] if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN else []
    return [signal.SIGINT, signal.SIGTERM, *hangup]


def check() -> None:
    """Raise the interrupt that arrived earlier and could not be delivered where it landed (or was
    deferred)."""
    if _pending:
        raise Interrupted(_pending[0])


# How many ``interruptible()`` blocks are open (the CLI opens one around the whole command, the
# study another around the trials), and how many ``deferred()`` ones: inside those, a signal is only
# remembered.
_depth = [0]
_deferring = [0]


def _handler(signum: int, _frame: FrameType | None) -> None:
    # Only the first signal raises: a second one (an impatient Ctrl-C, a supervisor's repeated
    # SIGTERM) lands in the cleanup the first one started, and cutting that short would leave the
    # server running.
    first = not _pending
    _pending.append(signum)
    if first and not _deferring[0]:
        raise Interrupted(signum)


@contextmanager
def interruptible(*, then_exit: bool = False) -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C: the running trial stops now, is recorded, and the target is
    restored.

    Re-entrant: only the outermost block installs the handlers and, on leaving, puts the previous
    ones back — unless ``then_exit`` (a command: the process ends once the block is left) and a
    signal came: then the handlers stay, only counting further signals, so that a second Ctrl-C or
    SIGTERM on the way out can turn the one-line exit 130/143 neither into a traceback nor into a
    kill by the default SIGTERM action."""
    if threading.current_thread() is not threading.main_thread():
        # no handler can be installed off the main thread (a test running a command in a thread)
        yield
        return
    if _depth[0]:
        _depth[0] += 1
        try:
            yield
        finally:
            _depth[0] -= 1
        return
    previous_hook = sys.unraisablehook

    def unraisable(info: Any) -> None:
        if not isinstance(info.exc_value, Interrupted):
            previous_hook(info)

    sys.unraisablehook = unraisable
    _pending.clear()  # what an earlier ``then_exit`` block left counting belongs to that command
    previous = {s: signal.signal(s, _handler) for s in _handled()}
    _depth[0] = 1
    try:
        yield
    finally:
        _depth[0] = 0
        if not (then_exit and _pending):
            for s, h in previous.items():
                signal.signal(s, h)
            sys.unraisablehook = previous_hook
            _pending.clear()


@contextmanager
def deferred() -> Iterator[None]:
    """Cleanup that must finish (stopping the server, restoring the target): a second Ctrl-C or
    SIGTERM that arrives now is remembered — ``check()`` afterwards raises it — instead of cutting
    the cleanup short."""
    _deferring[0] += 1
    try:
        yield
    finally:
        _deferring[0] -= 1


@contextmanager
def held() -> Iterator[None]:
    """Writes that must land together (a trial's record, one attribute per write): a signal that
    arrives meanwhile waits until the block ends and is raised then — unless an enclosing
    ``deferred()`` or ``defer_from_here`` still holds it, which raises it in turn."""
    with deferred():
        yield
    if not _deferring[0]:
        check()


# The open ``deferrable()`` blocks, innermost last: whether code inside has begun deferring
# (``defer_from_here``).
_spans: list[bool] = []


@contextmanager
def deferrable() -> Iterator[None]:
    """A block in which code may begin deferring signals (``defer_from_here``) until the block ends.

    For a step whose end lies outside the code that knows it began: Optuna stores a trial's result
    (``tell``) after the objective has returned, and catches only ``Exception`` there — an interrupt
    raised inside leaves Optuna's own state half set (``UnboundLocalError: … 'updated_state'``), the
    trial RUNNING and the server up. The objective defers from its bookkeeping on; the study loop's
    ``deferrable()`` around ``optimize`` ends the deferral once the trial is stored, and its
    ``check()`` then raises what came meanwhile."""
    _spans.append(False)
    try:
        yield
    finally:
        if _spans.pop():
            _deferring[0] -= 1


def defer_from_here() -> None:
    """Inside a ``deferrable()`` block: remember signals from now to the block's end instead of
    raising them (idempotent). Outside one, nothing: no caller could end the deferral."""
    if _spans and not _spans[-1]:
        _spans[-1] = True
        _deferring[0] += 1


def received() -> int:
    """How many signals the open ``interruptible()`` block has received (0 outside one)."""
    return len(_pending)

