"""The engine's clock: a deadline schedule in simulated time, played in real (or virtual) time.

Every scheduler phase has a simulated cost; the schedule is the running sum of those costs, and
phase k ends at ``start + Σcost / time_scale`` of loop time. Sleeping to that deadline (never for a
duration) keeps Python work and timer granularity from adding up.

Falling behind: when the process was descheduled (a busy host) the deadline is already past on
waking. Up to ``tolerance_s`` of lag the clock catches up — the next phases run back to back until
the schedule is met — so a short stall changes nothing a client measures between a request's first
and last token. Lag beyond the tolerance is given up (the schedule restarts ``tolerance_s`` behind
now) and counted in ``dropped_s``: the simulated server then really ran slower than the model, so
the figures measured meanwhile are the host's, not the model's. ``dropped_s`` against ``busy_s`` is
what /get_server_info reports for a measuring side to refuse such a phase
(``simulator-overloaded``); a bounded catch-up also keeps a request admitted while the clock is late
from seeing a schedule that is mostly in its past, which would measure it faster than the model.

The timeline (``timeline_s``): the schedule as a measuring side should see it, in real seconds at
the model's pace — each phase's duration, plus the idle gaps between busy periods — so that given-up
and caught-up lag never enter it. The engine stamps each chunk with the timeline at the end of the
iteration that produced it and each request with the start of the phase it arrived in
(``arrival_stamp``: the engine admits it only after that phase, and where inside it the request
landed is the client's and the host's timing); a load generator that reads those stamps measures the
model whatever the host's load did to the arrival times of the chunks.

``VirtualClock`` jumps to each deadline at once (after letting every other task react to what the
previous phase produced): tests run the engine without any dependence on the host's speed or load.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

#: Catch up at most this much lag (real seconds); beyond it the schedule is given up and counted.
#: Longer than the stalls a busy shared host gives a mostly-sleeping process (measured: up to ~0.1 s
#: with load 9 on 2 cores), short next to a request at the demo's time scale (~1 s), which bounds
#: how much faster than the model a request admitted while the clock catches up can look.
DEFAULT_TOLERANCE_S = 0.2
#: Waking from idle above time scale 1, the engine lets a burst of arrivals settle before its
#: schedule starts: it waits until no request arrived for ARRIVAL_SETTLE_S (at most
#: ARRIVAL_SETTLE_MAX_S in all), and they all arrive at that moment of its timeline. A client needs
#: real milliseconds to send C requests, which at time scale X are X times as many simulated ones:
#: 64 sends spread over ~50 ms made the first wave's prefill several small ones and cost a C=64
#: window of 128 requests ~6 % at 10x. The real server sees the same sends within the same
#: milliseconds, i.e. practically at once. Costs an external client ~2 real ms of TTFT.
ARRIVAL_SETTLE_S = 0.002
ARRIVAL_SETTLE_MAX_S = 0.1
#: After an iteration that finished requests, the schedule stands still (``Clock.hold``) until as
#: many new ones arrived, at most this long (real time). A closed-loop client sends the next request
#: when it reads the last chunk; that takes it real milliseconds — X times as many simulated ones at
#: time scale X, and many more on a loaded host — so without the hold the replacement joined the
#: batch one to several iterations later, the batch ran short by a host-dependent amount and the
#: C=64 aggregate on the schedule moved with the host's load (the demo baseline: 1842 tok/s at load
#: 5 against 1920 at load 3.7). With it the replacement is admitted in the next iteration, as
#: ``ground_truth`` assumes and as a real server sees a client whose reaction is short next to an
#: iteration. A hold that times out (the client stopped sending: a phase's tail, an open loop) turns
#: holding off until the next arrival, so a phase's tail costs one timeout, not one per iteration.
#: 250 ms, not 50 or 100: beside 8 busy processes on 2 cores a client took longer than 50 ms to
#: send its replacements in 1 C=64 phase of 8 at time scale 25, and longer than 100 ms in 7 of 14
#: C=64 phases run back to back at time scale 1 (0 of 10 with 250 ms); each such phase's TTFT p50
#: read 4–19 % high. A timeout costs one phase's tail ~0.15 s more (bench/simulator_under_load.py).
REPLACEMENT_HOLD_MAX_S = 0.25
#: At time scale 1 or below, where a client timing on its own clock (bench_serving) can be compared
#: with the stamps, a phase's chunks leave WALL_CLOCK_LEAD_S (real) before the phase ends on the
#: schedule: what such a client spends on loopback HTTP — connecting, sending, the server reading
#: the request, writing and the client parsing the chunk — measured 2.0–2.6 ms with bench_serving's
#: client (a new connection per request) on a quiet 2-core host. It then measures the model's TTFT
#: and E2E from its own send; without the lead it read ~2 ms more than the stamps, a quarter of a
#: C=1 TTFT of the built-in prompts (~6 ms). The stamps, and so spectune's figures, do not move.
#: A closed-loop client's next request then arrives at about the phase's end, as in the model.
WALL_CLOCK_LEAD_S = 0.0023
#: ... and the last PRECISE_WAKE_S of each sleep is slept by a worker thread, which wakes the loop
#: when it is done: asyncio on Linux sleeps in whole milliseconds (epoll), which woke the engine
#: 0–1 ms late, 0.55 ms on average — jitter a wall-clock client saw on every chunk.
#: A thread's sleep is precise to tens of microseconds and, unlike yielding to the loop until the
#: moment comes, keeps no core busy meanwhile. Above time scale 1 a phase is shorter than this and
#: a wall-clock client is not comparable anyway: the plain sleep stays.
PRECISE_WAKE_S = 0.001
#: Yields a virtual clock grants before each jump: enough for a client task to take a chunk from its
#: queue, record it and send its next request.
_VIRTUAL_YIELDS = 4


@dataclass
class ScheduleStats:
    """What /get_server_info reports of the schedule (seconds; cumulative since start)."""

    simulated_s: float = 0.0  # simulated time of every scheduled phase
    busy_s: float = 0.0  # real time spent on them (simulated / time scale + dropped)
    dropped_s: float = 0.0  # real time given up because the process was late beyond the tolerance
    late_events: int = 0  # how often that happened
    max_lag_s: float = 0.0  # the largest lag seen on waking (caught up or not)
    lag_sum_s: float = 0.0  # Σ lag over phases: chunks are late by lag_sum_s / phases on average
    phases: int = 0
    # real time the schedule stood still waiting for clients to replace finished requests
    held_s: float = 0.0
    holds_timed_out: int = 0  # holds that ended with a replacement still missing


class Clock:
    """Real loop time. ``restart()`` when the engine wakes from idle, ``advance(cost_ms)`` per
    phase."""

    def __init__(self, time_scale: float, tolerance_s: float = DEFAULT_TOLERANCE_S,
                 lead_s: float | None = None) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.time_scale = time_scale
        self.tolerance_s = tolerance_s
        # A wall-clock client is comparable with the stamps at time scale 1 or below only.
        self.wall_clock = time_scale <= 1.0
        self.lead_s = (WALL_CLOCK_LEAD_S if self.wall_clock else 0.0) if lead_s is None else lead_s
        self.stats = ScheduleStats()
        self.deadline = 0.0
        # at ``deadline``: the end of the phase being slept through (or the last one)
        self.timeline_s = 0.0
        self._phase_start_s = 0.0  # the timeline where that phase began
        self._in_phase = False  # sleeping through a phase (arrivals wait for its end)
        self._started = False

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def restart(self) -> None:
        """The engine woke from idle: the schedule starts again now; the idle gap counts in the
        timeline."""
        now = self.now()
        if self._started:
            self.timeline_s += max(0.0, now - self.deadline)
        self._started = True
        self._phase_start_s = self.timeline_s
        self.deadline = now

    def arrival_stamp(self) -> float:
        """Where a request arriving now starts on the timeline: the start of the phase being slept
        through (the engine admits it only after that phase), else — between phases — the timeline's
        end.

        Not ``timeline_now()``: where inside a phase a request lands is the client's and the host's
        timing (a client reacting 1 ms later at time scale 25 lands 25 simulated ms later), so TTFT
        and E2E measured from it moved with the host's load (C=64 TTFT p50 242 ms at load 2, 174 ms
        at load 6). From the phase's start they are the model's: the wait for the current iteration,
        the prefill, the decode. A closed-loop client that answers a chunk at once — what
        bench_serving does on a quiet machine — sends its next request right at that phase's start,
        so the zero point is the same as bench_serving's."""
        return self._phase_start_s if self._in_phase else self.timeline_s

    def timeline_now(self) -> float:
        """The timeline at this moment: inside the phase being slept through, or its end when
        late."""
        return max(self._phase_start_s, self.timeline_s - max(0.0, self.deadline - self.now()))

    def lag_s(self) -> float:
        """How far behind its schedule the engine is right now (0 when on time)."""
        return max(0.0, self.now() - self.deadline)

    async def advance(self, cost_ms: float) -> float:
        """Sleep until the end of a phase of ``cost_ms`` simulated milliseconds; returns the lag
        given up (s)."""
        duration = cost_ms / 1000.0 / self.time_scale
        stats = self.stats
        stats.simulated_s += cost_ms / 1000.0
        stats.busy_s += duration
        stats.phases += 1
        target = self.deadline + duration
        self._phase_start_s = self.timeline_s
        self.timeline_s += duration
        now = self.now()
        lag = now - target
        dropped = 0.0
        if lag > 0:
            stats.lag_sum_s += min(lag, self.tolerance_s)
            stats.max_lag_s = max(stats.max_lag_s, lag)
            if lag > self.tolerance_s:
                dropped = lag - self.tolerance_s
                target = now - self.tolerance_s
                stats.dropped_s += dropped
                stats.busy_s += dropped
                stats.late_events += 1
        self.deadline = target
        self._in_phase = True
        try:
            await self._sleep_until(target - self.lead_s, now)
        finally:
            self._in_phase = False
        return dropped

    async def _sleep_until(self, target: float, now: float) -> None:
        if target > now:
            if not self.wall_clock:
                await asyncio.sleep(target - now)
                return
            if target - now > PRECISE_WAKE_S:
                await asyncio.sleep(target - now - PRECISE_WAKE_S)
            left = target - self.now()
            if left > 0:  # the loop keeps serving I/O meanwhile
                await asyncio.to_thread(time.sleep, left)
        else:
            await asyncio.sleep(0)  # let the handlers write what the previous phase produced

    async def hold(self, ready: Callable[[], bool], wake: asyncio.Event, max_s: float) -> bool:
        """Stand still between two phases until ``ready()`` (set ``wake`` to re-check) or ``max_s``
        real seconds passed; returns ``ready()``. The schedule does not move meanwhile: the deadline
        shifts by the time held (the lag the engine had stays what it was) and the timeline gains
        nothing, so what arrives during the hold starts at the end of the last phase whether the
        client took 0.1 ms or 40 ms to send it."""
        start = self.now()
        give_up = start + max_s
        while not ready():
            left = give_up - self.now()
            if left <= 0:
                break
            wake.clear()
            try:
                await asyncio.wait_for(wake.wait(), left)
            except TimeoutError:
                break
        held = self.now() - start
        # Only the time held past the deadline moves it: a hold that began early (the phase's
        # chunks left ``lead_s`` ahead) spends its first part inside the schedule.
        self.deadline += max(0.0, held - max(0.0, self.deadline - start))
        self.stats.held_s += held
        done = ready()
        if not done:
            self.stats.holds_timed_out += 1
        return done


class VirtualClock(Clock):
    """Simulated seconds / time scale, advanced only by the engine: no sleeping, no dependence on
    the host."""

    def __init__(self, time_scale: float = 1.0) -> None:
        super().__init__(time_scale, tolerance_s=float("inf"), lead_s=0.0)
        self._now = 0.0

    def now(self) -> float:
        return self._now

    async def _sleep_until(self, target: float, now: float) -> None:
        # Everyone reacts to the previous phase's chunks at that phase's time, then time jumps.
        for _ in range(_VIRTUAL_YIELDS):
            await asyncio.sleep(0)
        self._now = max(self._now, target)

    async def hold(self, ready: Callable[[], bool], wake: asyncio.Event, max_s: float) -> bool:
        # A client reacts within a few task switches; time does not move meanwhile.
        for _ in range(_VIRTUAL_YIELDS):
            if ready():
                return True
            await asyncio.sleep(0)
        return ready()
