"""One prefill (extend) batch as SGLang's scheduler forms it (``PrefillAdder``,
``managers/schedule_policy.py``, 0.5.23).

Each batch has two token budgets: ``--max-prefill-tokens`` (16,384 by default) and, with chunked
prefill on, ``--chunked-prefill-size`` (8,192 below 160 GB of GPU memory, else 16,384). Requests
are taken first come, first served while both budgets last. With chunked prefill, a prompt whose
rest does not fit the chunk budget is cut to fill it — that request is *chunked*: it gives no token
yet, and the next batch continues it before anyone else. Without chunked prefill, a request that
reaches the input budget waits for the next batch, unless it is the batch's first.

The scheduler runs a prefill batch whenever one can be formed, and a decode iteration only when
none can; so a wave of long prompts is prefilled batch after batch, and its requests get their
first tokens in steps (at 1,024-token prompts and the 8,192-token chunk, about 8 requests a step),
not all at the end of one long prefill. Below the budgets (short prompts, or the few replacements
of a closed loop) a batch takes every request that fits, as before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.simulator.config import ServerConfig
from tuner.simulator.running import Running


@dataclass(frozen=True)
class PrefillLimits:
    max_prefill_tokens: int
    #: ``--chunked-prefill-size`` (None: chunked prefill off, SGLang's -1).
    chunk: int | None

    @classmethod
    def of(cls, config: ServerConfig) -> PrefillLimits:
        chunk = config.chunked_prefill_size
        return cls(config.max_prefill_tokens, chunk if chunk > 0 else None)


@dataclass
class PrefillBatch:
    """What one extend batch runs."""

    #: New prompt tokens it prefills (0: no batch could be formed).
    tokens: int = 0
    #: The requests whose prompt it completes: each gets its first token from it.
    done: list[Running] = field(default_factory=list)
    #: The request it leaves partly prefilled (the next batch continues it first).
    chunked: Running | None = None


def form_batch(limits: PrefillLimits, chunked: Running | None, waiting: deque[Running],
               fits: Callable[[Running], bool], admit: Callable[[Running], None]) -> PrefillBatch:
    """The next batch: ``chunked`` continued first (unless cancelled), then ``waiting`` in order
    while the budgets last, cancelled ones dropped. ``fits``: whether the head of the queue may run
    now (the running-request cap, the KV pool); ``admit`` moves it to the running ones."""
    batch = PrefillBatch()
    input_left = limits.max_prefill_tokens
    chunk_left = limits.chunk

    def take(r: Running) -> None:
        nonlocal input_left, chunk_left
        n = r.prefill_left if chunk_left is None else min(r.prefill_left, chunk_left)
        r.prefill_left -= n
        batch.tokens += n
        input_left -= n
        if chunk_left is not None:
            chunk_left -= n
        if r.prefill_left:
            batch.chunked = r
        else:
            batch.done.append(r)

    if chunked is not None and not chunked.cancelled:
        take(chunked)
    while batch.chunked is None and waiting:
        head = waiting[0]
        if head.cancelled:  # the client went away while it waited
            waiting.popleft()
            continue
        if input_left <= 0 or (chunk_left is not None and chunk_left <= 0) or not fits(head):
            break
        if chunk_left is None and batch.tokens and head.prefill_left >= input_left:
            break  # "without chunking, allow the first request even above the cap"
        waiting.popleft()
        admit(head)
        take(head)
    return batch
