"""Signals while a command runs (tuner/core/interrupts.py): the first one raises where the program
is, later ones are only counted — inside the block and, for a command (``then_exit``), on its way
out as well."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from tuner.core import interrupts
from tuner.core.errors import Interrupted


@pytest.fixture(autouse=True)
def _own_handlers_back() -> Iterator[None]:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, handler in before.items():
        signal.signal(s, handler)


def test_a_command_keeps_counting_signals_on_its_way_out() -> None:
    with pytest.raises(Interrupted) as raised, interrupts.interruptible(then_exit=True):
        os.kill(os.getpid(), signal.SIGTERM)
    assert raised.value.exit_code == 143
    # Out of the block, before the process ends: a second SIGTERM neither kills nor raises.
    os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGINT)
    assert interrupts.received() == 3
    # A new command in the same process (a test's CliRunner) starts afresh: its first signal raises
    # again.
    with pytest.raises(Interrupted), interrupts.interruptible():
        assert interrupts.received() == 0
        os.kill(os.getpid(), signal.SIGINT)


def test_without_then_exit_the_previous_handlers_come_back() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted), interrupts.interruptible():
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is previous and interrupts.received() == 0


def test_a_second_signal_in_a_deferred_cleanup_is_remembered() -> None:
    with pytest.raises(Interrupted) as raised, interrupts.interruptible():
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except Interrupted:
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)  # the cleanup goes on
                assert interrupts.received() == 2
            raise
    assert raised.value.exit_code == 130  # the first signal's


def test_an_error_raised_while_an_interrupt_unwinds_is_not_logged_with_its_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    """SQLAlchemy logs "Error closing cursor" (a closed database) when SIGTERM cut a query short:
    that record carries the interrupt only as its context, and must not print a traceback beside the
    one-line message."""
    import logging

    interrupts.silence_tracebacks("tests.unit.core.pool", Interrupted)
    logger = logging.getLogger("tests.unit.core.pool")
    try:
        try:
            raise Interrupted(signal.SIGTERM)
        except Interrupted:
            raise RuntimeError("Cannot operate on a closed database.")  # noqa: B904 - the implicit chain is the case
    except RuntimeError:
        logger.error("Error closing cursor", exc_info=True)
    try:
        raise RuntimeError("a real failure")
    except RuntimeError:
        logger.error("Error closing cursor", exc_info=True)
    messages = [r.exc_info[1].args[0] for r in caplog.records if r.name == "tests.unit.core.pool"
                and r.exc_info]
    assert messages == ["a real failure"]


def test_a_signal_after_defer_from_here_waits_for_the_end_of_the_deferrable_block() -> None:
    """As a trial's result is stored by Optuna after the objective returned: the signal is raised
    once the block around it ends (``check``), not inside it."""
    with pytest.raises(Interrupted) as raised, interrupts.interruptible():
        with interrupts.deferrable():
            interrupts.defer_from_here()
            interrupts.defer_from_here()  # idempotent: one deferral, ended once
            os.kill(os.getpid(), signal.SIGTERM)
            stored = True  # not reached if the signal had raised
        assert stored and interrupts.received() == 1
        interrupts.check()
    assert raised.value.exit_code == 143


def test_defer_from_here_outside_a_deferrable_block_defers_nothing() -> None:
    """Nobody could end such a deferral (a trial run by the confirmation stage or a landscape):
    no-op."""
    with pytest.raises(Interrupted), interrupts.interruptible():
        interrupts.defer_from_here()
        os.kill(os.getpid(), signal.SIGINT)


def test_sighup_is_handled_unless_it_was_ignored() -> None:
    # as from a terminal, whatever started this run
    before = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        with pytest.raises(Interrupted) as raised, interrupts.interruptible():
            os.kill(os.getpid(), signal.SIGHUP)
        assert raised.value.exit_code == 129
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
        with interrupts.interruptible():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
