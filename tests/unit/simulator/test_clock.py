"""The clock's delivery for a wall-clock client: chunks leave a fixed lead before their phase ends
at time scale 1 (not above), the stamps stay the schedule's, a hold that begins inside that lead
moves the schedule only by what it lasts past the deadline, and the last millisecond of a sleep is
slept by a thread rather than by a coarse timer. A clock whose time the test sets: nothing here
depends on the host's speed or load."""

from __future__ import annotations

import asyncio

import pytest

from tuner.simulator import clock as clock_module
from tuner.simulator.clock import PRECISE_WAKE_S, WALL_CLOCK_LEAD_S, Clock, VirtualClock


class ManualClock(Clock):
    """The real Clock's schedule arithmetic; time moves only when a sleep ends (to what it asked)
    or the test moves it."""

    def __init__(self, time_scale: float, **kwargs: float) -> None:
        super().__init__(time_scale, **kwargs)
        self.t = 0.0
        self.woken_at: list[float] = []

    def now(self) -> float:
        return self.t

    async def _sleep_until(self, target: float, now: float) -> None:
        self.t = max(self.t, target)
        self.woken_at.append(self.t)


def test_at_time_scale_1_chunks_leave_the_lead_early_and_the_stamps_stay() -> None:
    async def run() -> ManualClock:
        clock = ManualClock(1.0)
        clock.restart()
        for _ in range(3):
            await clock.advance(10.0)
        return clock

    clock = asyncio.run(run())
    assert clock.lead_s == WALL_CLOCK_LEAD_S > 0
    # Every phase wakes the lead before its end; the lead does not add up over phases.
    assert clock.woken_at == pytest.approx([0.010 - WALL_CLOCK_LEAD_S, 0.020 - WALL_CLOCK_LEAD_S,
                                            0.030 - WALL_CLOCK_LEAD_S])
    assert clock.deadline == pytest.approx(0.030) and clock.timeline_s == pytest.approx(0.030)
    assert clock.stats.dropped_s == 0 and clock.stats.late_events == 0


@pytest.mark.parametrize("time_scale", [2.0, 25.0])
def test_above_time_scale_1_there_is_no_lead(time_scale: float) -> None:
    async def run() -> ManualClock:
        clock = ManualClock(time_scale)
        clock.restart()
        await clock.advance(10.0)
        return clock

    clock = asyncio.run(run())
    assert clock.lead_s == 0 and clock.woken_at == pytest.approx([0.010 / time_scale])


def test_a_virtual_clock_has_no_lead() -> None:
    assert VirtualClock(1.0).lead_s == 0


@pytest.mark.parametrize(("reaction_s", "shift_s"), [
    (0.0005, 0.0),  # the replacement came within the lead: the schedule does not move
    (0.0030, 0.0030 - WALL_CLOCK_LEAD_S),  # only what the hold lasted past the deadline moves it
])
def test_a_hold_inside_the_lead_does_not_move_the_schedule(reaction_s: float,
                                                             shift_s: float) -> None:
    async def run() -> tuple[float, float, ManualClock]:
        clock = ManualClock(1.0)
        clock.restart()
        await clock.advance(10.0)
        deadline, timeline = clock.deadline, clock.timeline_s
        arrived: list[bool] = []

        def ready() -> bool:
            if not arrived:  # the client's replacement lands reaction_s after the early wake
                clock.t += reaction_s
                arrived.append(True)
            return True

        assert await clock.hold(ready, asyncio.Event(), max_s=1.0)
        return clock.deadline - deadline, clock.timeline_s - timeline, clock

    shift, gained, clock = asyncio.run(run())
    assert shift == pytest.approx(shift_s, abs=1e-12) and gained == 0
    assert clock.stats.held_s == pytest.approx(reaction_s)


def test_a_late_hold_moves_the_schedule_by_all_it_lasted() -> None:
    """A hold that begins past the deadline (the engine was late) keeps the lag it had."""

    async def run() -> float:
        clock = ManualClock(1.0)
        clock.restart()
        await clock.advance(10.0)
        clock.t = clock.deadline + 0.004  # late by 4 ms
        deadline = clock.deadline

        def ready() -> bool:
            clock.t += 0.003
            return True

        await clock.hold(ready, asyncio.Event(), max_s=1.0)
        return clock.deadline - deadline

    assert asyncio.run(run()) == pytest.approx(0.003)


@pytest.mark.parametrize(("time_scale", "coarse", "precise"), [
    (1.0, 0.010 - PRECISE_WAKE_S, PRECISE_WAKE_S), (25.0, 0.010, None)])
def test_the_last_millisecond_is_slept_by_a_thread_at_time_scale_1(
        monkeypatch: pytest.MonkeyPatch, time_scale: float, coarse: float,
        precise: float | None) -> None:
    """asyncio's timers wake in whole milliseconds on Linux; at time scale 1 no timer is asked to
    reach into the sleep's last millisecond, which a worker thread sleeps; above it a single
    plain sleep stays (a phase is shorter than a millisecond there)."""
    timers: list[float] = []
    threads: list[float] = []
    real_sleep = asyncio.sleep
    now = [0.0]

    async def timer(delay: float) -> None:
        timers.append(delay)
        now[0] += delay
        await real_sleep(0)

    def thread_sleep(seconds: float) -> None:
        threads.append(seconds)
        now[0] += seconds

    class Timed(Clock):
        def now(self) -> float:
            return now[0]

    monkeypatch.setattr(clock_module.asyncio, "sleep", timer)
    monkeypatch.setattr(clock_module.time, "sleep", thread_sleep)
    clock = Timed(time_scale, lead_s=0.0)
    asyncio.run(clock._sleep_until(0.010, 0.0))
    assert timers == pytest.approx([coarse])
    assert threads == ([] if precise is None else pytest.approx([precise]))
    assert now[0] == pytest.approx(0.010)


def test_a_real_precise_sleep_never_ends_before_its_moment() -> None:
    """Through the real thread: the sleep ends at its target or after, never before (how much after
    is the host's business, not a test's)."""

    async def run() -> list[float]:
        clock = Clock(1.0)
        early = []
        for _ in range(5):
            target = clock.now() + 0.003
            await clock._sleep_until(target, clock.now())
            early.append(target - clock.now())
        return early

    assert all(e <= 0 for e in asyncio.run(run()))
