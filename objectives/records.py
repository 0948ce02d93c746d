"""One request's outcome as an immutable record: timings, token counts, and its error as data.

A failed request is data, not an exception: the client always returns a record, and aggregation
decides what an error rate means. Times are seconds from ``time.perf_counter``; ``start_s`` is
relative to the start of the measured part of its phase, every other time is relative to the
request's own start.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ErrorKind(StrEnum):
    """Why a request failed. One value per cause a tuner acts on differently."""

    CONNECT = "connect"  # refused, unreachable, or no connection within the connect timeout
    TIMEOUT = "timeout"  # the whole request exceeded the per-request timeout
    STALL = "stall"  # the stream went silent for longer than the stall timeout
    HTTP_4XX = "http_4xx"  # the server refused the request (bad body, unknown model, ...)
    HTTP_5XX = "http_5xx"  # the server failed (overloaded, crashed, OOM)
    DISCONNECT = "disconnect"  # the stream ended or broke before ``[DONE]``
    MALFORMED = "malformed"  # bytes that are not the SSE/JSON the API promises
    SERVER_ERROR = "server_error"  # an ``{"error": ...}`` object inside a 200 stream
    MISSING_USAGE = "missing_usage"  # no token count from the server: we never guess one
    BAD_USAGE = "bad_usage"  # token counts that contradict themselves (decreasing, negative, ...)
    DEADLINE = "deadline"  # still running when the phase deadline ended the phase
    CLIENT = "client"  # a bug on our side, caught so that one request cannot crash the phase


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What one request did.

    ``chunk_times_s[i]`` is when the i-th token-bearing chunk arrived (since the request started)
    and ``chunk_tokens[i]`` how many output tokens it carried, so ``chunk_times_s[0]`` is the TTFT
    and the gaps between consecutive entries are the inter-chunk gaps. With speculative decoding one
    chunk is one decode step and carries the accepted tokens of that step.

    ``tokens_exact`` is False only when the server gave a total but no per-chunk counts; the total
    was then spread over the chunks in proportion to their text length (the total itself still comes
    from the server).

    ``cancelled`` marks a request still in flight when its phase ended normally (duration reached,
    enough requests done): not an error, excluded from per-request statistics, but the tokens it
    received inside the measured window count towards throughput.
    """

    index: int
    start_s: float
    end_s: float  # since the request's start: end of stream, failure, or cancellation
    chunk_times_s: tuple[float, ...]
    chunk_tokens: tuple[int, ...]
    output_tokens: int
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    tokens_exact: bool = True
    http_status: int | None = None
    error_kind: ErrorKind | None = None
    error_message: str | None = None
    cancelled: bool = False
    # The server's own schedule, when it stamps its events (the simulator: objectives/client.py
    # SCHEDULE_KEY): the request's arrival on its timeline (seconds) and each kept chunk's time
    # since then, else None / ().
    server_start_s: float | None = None
    server_chunk_s: tuple[float, ...] = ()

    @property
    def ok(self) -> bool:
        """Completed and usable for per-request statistics."""
        return self.error_kind is None and not self.cancelled

    @property
    def ttft_s(self) -> float | None:
        return self.chunk_times_s[0] if self.chunk_times_s else None

    @property
    def e2e_s(self) -> float:
        return self.end_s
