"""One streaming request in, one ``RequestRecord`` out — whatever the server does.

The client never raises for a bad response: refused connections, HTTP errors, broken or silent
streams, garbage events and impossible token counts all end as a record with an ``ErrorKind``. Only
cancellation (the phase ending) propagates; the phase then turns the request's ``Trace`` into a
record itself.

The loop over a stream is the hot path of the load generator: one ``perf_counter`` per socket read
(every event in that read arrived at the same moment, as far as the client can know), one
``json.loads`` and a few dictionary look-ups per event, three list appends per token-bearing event.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from time import perf_counter

import aiohttp

from objectives.api import ApiFormat
from objectives.records import ErrorKind, RequestRecord
from objectives.sse import SSEDecoder, SSEError
from objectives.usage import ABSOLUTE_MAX_TOKENS, UsageProblem, chunk_tokens, count_problem

_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}
_DONE = b"[DONE]"
_ERROR_BODY_BYTES = 500
#: The simulator's schedule stamp on each token-bearing event: [request arrival, chunk] on its
#: timeline (tuner/simulator/protocol.py ``SCHEDULE_KEY``; a plain JSON key, so this package needs
#: no simulator code).
SCHEDULE_KEY = "simulator_schedule"


class _StreamProblem(Exception):
    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Timeouts:
    """``connect``: TCP connect; ``stall``: longest silence inside a response; ``request``: the
    whole request."""

    connect_s: float
    stall_s: float
    request_s: float


@dataclass(eq=False)
class Trace:
    """The mutable state of one request in flight; readable by the phase while the request runs."""

    index: int
    # most completion tokens the request allows (objectives.usage.token_limit)
    limit: int = ABSOLUTE_MAX_TOKENS
    start: float = 0.0  # perf_counter when the request was sent
    # absolute perf_counter of each token-bearing event
    times: list[float] = field(default_factory=list)
    cumulative: list[int | None] = field(default_factory=list)
    chars: list[int] = field(default_factory=list)
    # each event's SCHEDULE_KEY (None from a real server)
    schedule: list[object] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    status: int | None = None

    def record(self, t0: float, end: float, kind: ErrorKind | None = None,
               message: str | None = None, cancelled: bool = False) -> RequestRecord:
        """Freeze into a record; ``t0`` is the phase's measured start, ``end`` an absolute
        perf_counter."""
        try:
            chunks = chunk_tokens(self.times, self.cumulative, self.chars, self.limit)
        except UsageProblem as problem:
            chunks = None
            if kind is None and not cancelled:
                kind, message = problem.kind, str(problem)
        prompt = self.prompt_tokens
        prompt_problem = None if prompt is None else count_problem(prompt, ABSOLUTE_MAX_TOKENS,
                                                                   "prompt_tokens")
        if prompt_problem is not None:
            prompt = None
            if kind is None and not cancelled:
                chunks, kind, message = None, ErrorKind.BAD_USAGE, prompt_problem
        start = self.start
        server = None
        stamped = _server_times(self.schedule) if chunks else None
        if stamped is not None:  # the same chunks as ``chunks``, at their scheduled times
            server = stamped[0], chunk_tokens(stamped[1], self.cumulative, self.chars,
                                              self.limit).times
        return RequestRecord(
            index=self.index,
            start_s=start - t0,
            end_s=end - start,
            chunk_times_s=tuple(t - start for t in chunks.times) if chunks else (),
            chunk_tokens=chunks.tokens if chunks else (),
            output_tokens=chunks.total if chunks else 0,
            prompt_tokens=prompt,
            finish_reason=self.finish_reason if isinstance(self.finish_reason, str) else None,
            tokens_exact=chunks.exact if chunks else True,
            http_status=self.status,
            error_kind=kind,
            error_message=message,
            cancelled=cancelled,
            server_start_s=server[0] if server else None,
            server_chunk_s=server[1] if server else (),
        )


def _server_times(stamps: list[object]) -> tuple[float, list[float]] | None:
    """(arrival, each event's time since it) on the server's schedule; None unless every
    token-bearing event carried a sensible stamp (one arrival, times not before it and never going
    back)."""
    if not stamps:
        return None
    arrival: float | None = None
    times: list[float] = []
    for stamp in stamps:
        if not (isinstance(stamp, list) and len(stamp) == 2
                and all(type(v) in (int, float) for v in stamp)):
            return None
        a, t = float(stamp[0]), float(stamp[1])
        if arrival is None:
            arrival = a
        if a != arrival or t < a or (times and t < times[-1]):
            return None
        times.append(t - a)
    return (arrival, times) if arrival is not None else None


async def send(session: aiohttp.ClientSession, url: str, body: bytes, api: ApiFormat, trace: Trace,
               timeouts: Timeouts, t0: float) -> RequestRecord:
    """POST ``body`` to ``url`` and stream the answer into ``trace``; always returns a record."""
    trace.start = perf_counter()
    try:
        async with asyncio.timeout(timeouts.request_s):
            end = await _stream(session, url, body, api, trace, timeouts)
    except _StreamProblem as problem:
        return trace.record(t0, perf_counter(), problem.kind, str(problem))
    except aiohttp.ConnectionTimeoutError:
        return trace.record(t0, perf_counter(), ErrorKind.CONNECT,
                            f"no connection within {timeouts.connect_s:g} s")
    except aiohttp.SocketTimeoutError:
        return trace.record(t0, perf_counter(), ErrorKind.STALL,
                            f"nothing received for {timeouts.stall_s:g} s")
    except TimeoutError:
        return trace.record(t0, perf_counter(), ErrorKind.TIMEOUT,
                            f"not finished within {timeouts.request_s:g} s")
    except aiohttp.ClientConnectorError as exc:
        return trace.record(t0, perf_counter(), ErrorKind.CONNECT, _describe(exc))
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError,
            ConnectionError) as exc:
        return trace.record(t0, perf_counter(), ErrorKind.DISCONNECT, _describe(exc))
    except aiohttp.ClientResponseError as exc:  # e.g. an invalid HTTP status line or header
        return trace.record(t0, perf_counter(), ErrorKind.MALFORMED, _describe(exc))
    except Exception as exc:  # one request must never crash the phase
        return trace.record(t0, perf_counter(), ErrorKind.CLIENT, _describe(exc))
    return trace.record(t0, end)


async def _stream(session: aiohttp.ClientSession, url: str, body: bytes, api: ApiFormat,
                  trace: Trace, timeouts: Timeouts) -> float:
    """Read the response to its ``[DONE]``; returns the time it arrived. Raises on any problem."""
    request_timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeouts.connect_s,
                                            sock_read=timeouts.stall_s)
    async with session.post(url, data=body, headers=_HEADERS, timeout=request_timeout) as response:
        trace.status = response.status
        if response.status >= 400:
            text = (await response.content.read(_ERROR_BODY_BYTES)).decode("utf-8",
                                                                           "replace").strip()
            kind = ErrorKind.HTTP_5XX if response.status >= 500 else ErrorKind.HTTP_4XX
            raise _StreamProblem(kind, f"HTTP {response.status}: {' '.join(text.split())}")
        decoder = SSEDecoder()
        loads = json.loads
        extract = api.extract
        times, cumulative, chars, schedule = (trace.times, trace.cumulative, trace.chars,
                                              trace.schedule)
        limit = trace.limit
        events = 0

        def handle(payloads: list[bytes], now: float) -> bool:
            """Record the events of one socket read; True once ``[DONE]`` arrived."""
            nonlocal events
            for payload in payloads:
                events += 1
                if payload == _DONE:
                    return True
                try:
                    obj = loads(payload)
                    if "error" in obj:
                        raise _StreamProblem(ErrorKind.SERVER_ERROR, _server_error(obj["error"]))
                    completion, n, finish, prompt = extract(obj)
                except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
                    raise _StreamProblem(
                        ErrorKind.MALFORMED,
                        f"bad event {payload[:120]!r}: {type(exc).__name__}") from None
                # A chunk that repeats the last count without text carries no token (keep-alives,
                # the final usage chunk): it is not kept, so an endless stream of them cannot grow
                # the trace.
                if n or (completion is not None
                         and (not cumulative or completion != cumulative[-1])):
                    # Checked as they arrive, so a lying server is cut off at once and the trace
                    # stays bounded: a real answer has at most ``limit`` tokens, hence token-bearing
                    # chunks.
                    if completion is not None \
                            and (problem := count_problem(completion, limit)) is not None:
                        raise _StreamProblem(ErrorKind.BAD_USAGE, problem)
                    if len(times) >= limit:
                        raise _StreamProblem(ErrorKind.BAD_USAGE,
                                             f"more than {limit} token-bearing chunks: more than "
                                             "the request allows")
                    times.append(now)
                    cumulative.append(completion)
                    chars.append(n)
                    schedule.append(obj.get(SCHEDULE_KEY))
                if finish is not None:
                    trace.finish_reason = finish
                if prompt is not None:
                    trace.prompt_tokens = prompt
            return False

        now = perf_counter()
        try:
            async for data in response.content.iter_any():
                now = perf_counter()
                if handle(decoder.feed(data), now):
                    return now
            if handle(decoder.close(), now):
                return now
        except SSEError as exc:
            raise _StreamProblem(ErrorKind.MALFORMED, str(exc)) from None
    if events == 0:
        raise _StreamProblem(ErrorKind.MALFORMED,
                             "HTTP 200 without any SSE event (is streaming supported?)")
    raise _StreamProblem(ErrorKind.DISCONNECT,
                         f"the stream ended after {events} events without [DONE]")


def _server_error(error: object) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
