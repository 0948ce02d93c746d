"""What the engine hands its callers: requests in, chunks and statistics out, and its counters."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from tuner.simulator import text


@dataclass(frozen=True)
class GenerationRequest:
    prompt: str
    max_new_tokens: int
    temperature: float = 0.0
    ignore_eos: bool = False
    prompt_tokens: int | None = None  # given for input_ids; else counted from the prompt text
    internal: bool = False  # health checks: not counted in metrics or the accept-length average

    @property
    def input_tokens(self) -> int:
        return self.prompt_tokens if self.prompt_tokens is not None else text.count_prompt_tokens(
            self.prompt)


@dataclass(frozen=True)
class Chunk:
    """What one iteration gave one request."""

    text: str  # the new words
    new_tokens: int
    completion_tokens: int  # cumulative
    finish_reason: str | None  # "stop" | "length" on the last chunk
    verify_ct: int  # cumulative verify forwards of this request
    correct_drafts: int  # cumulative accepted draft tokens
    # the schedule's timeline (clock.Clock.timeline_s) at the end of the iteration that made it
    at_s: float = 0.0


@dataclass(frozen=True)
class SpecStats:
    """SGLang's per-request speculative meta_info
    (tokenizer_manager._calculate_spec_decoding_metrics)."""

    verify_ct: int
    num_correct_drafts: int
    num_proposed_drafts: int
    histogram: tuple[int, ...]  # index = accepted drafts in one verify
    completion_tokens: int

    @property
    def accept_length(self) -> float:
        return self.completion_tokens / self.verify_ct if self.verify_ct else 1.0

    @property
    def accept_rate(self) -> float:
        return (self.num_correct_drafts / self.num_proposed_drafts if self.num_proposed_drafts
                else 0.0)


class GenerationFailed(Exception):
    """The engine failed this request (e.g. the over-large draft tree's runtime error)."""


@dataclass(eq=False)
class RequestHandle:
    """The caller's side of one request: an async stream of chunks, then the request's
    statistics."""

    rid: str
    prompt_tokens: int
    output_length: int
    created: float = field(default_factory=time.time)
    _queue: asyncio.Queue[Chunk | GenerationFailed] = field(default_factory=asyncio.Queue)
    stats: SpecStats | None = None  # set with the last chunk
    # the schedule's timeline when the request arrived (set by the engine)
    arrival_s: float | None = None

    async def chunks(self) -> AsyncIterator[Chunk]:
        """Chunks as the iterations produce them; raises ``GenerationFailed`` if the engine fails
        it."""
        while True:
            item = await self._queue.get()
            if isinstance(item, GenerationFailed):
                raise item
            yield item
            if item.finish_reason is not None:
                return


@dataclass
class Counters:
    """Prometheus counters (updated when a request finishes, as SGLang's tokenizer manager does) and
    the scheduler's own totals for ``avg_spec_accept_length`` (reset by /flush_cache)."""

    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    verify_calls_total: int = 0
    requests_total: int = 0
    # scheduler side, since the last flush
    accepted_tokens: int = 0  # bonus included
    verify_forwards: int = 0
    avg_spec_accept_length: float | None = None  # snapshot every decode-log interval
    last_gen_throughput: float = 0.0
    interval_tokens: int = 0
    interval_started: float = field(default_factory=time.monotonic)

    def interval_line(self, running: int, kv_used: int, capacity: int, waiting: int) -> str:
        """Close a decode-log interval (accept length and throughput snapshots) and return SGLang's
        log line."""
        if self.verify_forwards:
            self.avg_spec_accept_length = self.accepted_tokens / self.verify_forwards
        now = time.monotonic()
        elapsed = now - self.interval_started
        self.last_gen_throughput = self.interval_tokens / elapsed if elapsed > 0 else 0.0
        self.interval_tokens = 0
        self.interval_started = now
        accept = (f"accept len: {self.avg_spec_accept_length:.2f}, " if self.avg_spec_accept_length
                  else "")
        return (f"Decode batch. #running-req: {running}, #token: {kv_used}, "
                f"token usage: {kv_used / capacity if capacity else 0:.2f}, {accept}"
                f"gen throughput (token/s): {self.last_gen_throughput:.2f}, #queue-req: {waiting}")
