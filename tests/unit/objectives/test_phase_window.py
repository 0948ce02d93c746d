"""The measured window of an n-request phase, on virtual time: the phase's ``send`` is replaced by
one that answers at once with a record whose timings are scripted, so counts and the window
definition are checked exactly, with no dependence on how fast this machine is."""

from __future__ import annotations

import asyncio
from time import perf_counter

import aiohttp
import pytest

from objectives import phase as phase_module
from objectives.api import APIS, ApiFormat
from objectives.client import Timeouts, Trace
from objectives.phase import PhaseRunner
from objectives.records import ErrorKind, RequestRecord
from objectives.results import PhaseResult
from objectives.spec import PhaseSpec


class VirtualServer:
    """Request i lasts ``durations[i % len]`` virtual seconds and streams ``tokens`` tokens, one per
    chunk spread evenly over its life; every ``fail_every``-th request fails with a 500 instead."""

    def __init__(self, durations: list[float], tokens: int = 4, fail_every: int = 0) -> None:
        self.durations = durations
        self.tokens = tokens
        self.fail_every = fail_every
        self.sent: list[int] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def send(self, session: object, url: str, body: bytes, api: ApiFormat, trace: Trace,
                   timeouts: Timeouts, t0: float) -> RequestRecord:
        self.sent.append(trace.index)
        n = len(self.sent)  # this request's number, in sending order
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        trace.start = perf_counter()
        # let the other workers send: the order of events, not their speed, matters
        await asyncio.sleep(0)
        self.in_flight -= 1
        duration = self.durations[n % len(self.durations)]
        if self.fail_every and n % self.fail_every == 0:
            return trace.record(t0, trace.start + duration, ErrorKind.HTTP_5XX, "HTTP 500")
        for k in range(1, self.tokens + 1):
            trace.times.append(trace.start + duration * k / self.tokens)
            trace.cumulative.append(k)
            trace.chars.append(3)
        return trace.record(t0, trace.start + duration)


def run(spec: PhaseSpec, server: VirtualServer, monkeypatch: pytest.MonkeyPatch) -> PhaseResult:
    monkeypatch.setattr(phase_module, "send", server.send)

    async def main() -> PhaseResult:
        async with aiohttp.ClientSession() as session:
            runner = PhaseRunner(session, "http://127.0.0.1:9", APIS["chat"], lambda i: b"{}", spec,
                                 Timeouts(1, 1, 1), max_tokens=16)
            # no server for the accept-length probe: it would only cost connection attempts
            monkeypatch.setattr(phase_module.AcceptLengthProbe, "begin", _nothing)
            return await runner.run()

    return asyncio.run(main())


async def _nothing(self: object) -> None:
    return None


@pytest.mark.parametrize(("concurrency", "requests"), [(64, 256), (4, 10), (8, 3), (1, 5)])
def test_exactly_n_requests_are_sent_and_all_finish(monkeypatch: pytest.MonkeyPatch,
                                                    concurrency: int, requests: int) -> None:
    server = VirtualServer([1.0, 2.5, 0.7, 4.0, 1.3])
    phase = run(PhaseSpec(concurrency, requests=requests, warmup=2), server, monkeypatch)
    # warmup aside, not one more: no next wave inside the window
    assert len(server.sent) == requests + 2
    assert phase.stopped_by == "requests"
    assert (phase.completed, phase.failed, phase.cancelled) == (requests, 0, 0)
    assert len(phase.records) == requests
    assert server.most_in_flight == min(concurrency, requests)


def test_the_window_is_first_send_to_last_completion(monkeypatch: pytest.MonkeyPatch) -> None:
    server = VirtualServer([1.0, 2.5, 0.7, 4.0, 1.3], tokens=4)
    phase = run(PhaseSpec(4, requests=10, warmup=0), server, monkeypatch)
    records = phase.records
    assert min(r.start_s for r in records) == 0.0  # the window opens at the first send
    last = max(r.start_s + r.end_s for r in records)
    assert phase.duration_s == last  # and closes at the last completion, exactly
    assert last >= 4.0  # the slowest request (4 virtual seconds) is inside it, not cut off
    assert phase.output_tokens == 4 * 10  # every token of the n requests
    assert phase.aggregate_tok_s == pytest.approx(40 / last)
    assert phase.request_rate == pytest.approx(10 / last)


def test_failed_requests_count_towards_n_and_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    server = VirtualServer([1.0, 3.0], fail_every=3)
    phase = run(PhaseSpec(2, requests=9, warmup=0), server, monkeypatch)
    assert len(server.sent) == 9
    assert (phase.completed, phase.failed, phase.cancelled) == (6, 3, 0)
    assert phase.duration_s == max(r.start_s + r.end_s for r in phase.records)
    assert phase.output_tokens == 6 * 4  # failed requests bring no tokens


def test_a_timed_phase_still_cancels_at_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    # Not an n-phase: the window ends at t and the in-flight requests are cancelled, as before.
    class Slow(VirtualServer):
        async def send(self, *args: object, **kwargs: object) -> RequestRecord:
            trace = args[4]
            assert isinstance(trace, Trace)
            trace.start = perf_counter()
            self.sent.append(trace.index)
            await asyncio.sleep(3600)  # cancelled by the phase long before
            raise AssertionError("not reached")

    server = Slow([1.0])
    phase = run(PhaseSpec(3, duration_s=0.2, warmup=0), server, monkeypatch)
    assert phase.stopped_by == "duration"
    assert len(server.sent) == 3 and phase.cancelled == 3 and phase.failed == 0
