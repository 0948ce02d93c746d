"""Ways a started server fails, as SGLang's do: wrong text, out of memory at a large decode batch, a
hang, 5xx.

A profile lists them as ``[[faults]]`` tables (none in the shipped profiles: a study or test asks
for them with a profile file of its own). Each has a ``kind``, a ``when`` table matching the
*resolved* server arguments (the names ``/server_info`` shows: ``attention_backend = "triton"``,
``speculative_eagle_topk = { min = 2 }``; an empty ``when`` matches every configuration) and the
kind's parameters:

``wrong-output`` (``after_tokens``)
    every answer leaves the reference text after ``after_tokens`` tokens (what EAGLE on one
    attention backend did, sgl-project/sglang#16027).
``decode-oom`` (``gb_per_token``)
    a decode batch needs ``gb_per_token`` × running requests × draft tokens of activation memory
    beside the captured graphs; when that exceeds what the memory model leaves outside the static
    pool (``MemoryPlan.free_for_graphs_gb − graph_gb``) the scheduler dies with
    ``torch.OutOfMemoryError: CUDA out of memory`` and the process exits — long after it reported
    ready.
``hang`` (``after_requests``)
    after ``after_requests`` completed requests the scheduler stops making progress (requests and
    health checks go unanswered; the process stays up).
``server-errors`` (``above_running``)
    a request arriving while more than ``above_running`` requests are in flight is answered 500.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

KINDS: Final = ("wrong-output", "decode-oom", "hang", "server-errors")
_PARAMS: Final = {"wrong-output": "after_tokens", "decode-oom": "gb_per_token",
                  "hang": "after_requests", "server-errors": "above_running"}
#: What SGLang's scheduler and launcher log when a decode batch runs out of memory
#: (managers/scheduler.py, entrypoints/engine.py; the last line of the traceback is torch's
#: allocator message).
SCHEDULER_EXCEPTION: Final = "Scheduler hit an exception: Traceback (most recent call last):"
DECODE_OOM: Final = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {need:.2f} "
                     "GiB. GPU 0 has a total capacity of {total:.2f} GiB of which {free:.2f} GiB "
                     "is free.")
SIGQUIT: Final = "Received sigquit from a child process. It usually means the child failed."
SERVER_ERROR: Final = (
    "Internal server error: the scheduler failed to schedule the request (overloaded)")


@dataclass(frozen=True)
class FaultRule:
    kind: str
    when: Mapping[str, Any] = field(default_factory=dict)
    # the kind's parameter (after_tokens, gb_per_token, after_requests, above_running)
    value: float = 0.0

    def matches(self, args: Mapping[str, Any]) -> bool:
        return all(_matches(args.get(name), wanted) for name, wanted in self.when.items())


def _matches(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if not isinstance(actual, int | float) or isinstance(actual, bool):
            return False
        return float(wanted.get("min", -math.inf)) <= actual <= float(wanted.get("max", math.inf))
    return bool(actual == wanted)


def parse_faults(raw: Any, source: str) -> tuple[FaultRule, ...]:
    """The ``[[faults]]`` array of a profile (absent: none); raises ``ValueError`` naming the
    problem."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError(f"{source}: faults must be an array of tables ([[faults]])")
    rules = []
    for index, table in enumerate(raw):
        where = f"{source}: faults[{index}]"
        if not isinstance(table, dict):
            raise ValueError(f"{where} must be a table")
        kind = table.get("kind")
        if kind not in KINDS:
            raise ValueError(f"{where}: kind must be one of {', '.join(KINDS)} (got {kind!r})")
        param = _PARAMS[kind]
        unknown = sorted(set(table) - {"kind", "when", param})
        if unknown:
            raise ValueError(
                f"{where}: unknown key {unknown[0]} (a {kind} fault takes when and {param})")
        value = table.get(param)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value < 0:
            raise ValueError(f"{where}: {param} must be a non-negative number")
        when = table.get("when") or {}
        if not isinstance(when, dict):
            raise ValueError(f"{where}: when must be a table of server arguments")
        rules.append(FaultRule(kind, dict(when), float(value)))
    return tuple(rules)


@dataclass(frozen=True)
class ActiveFaults:
    """The faults one resolved configuration has (None / 0: that kind is off)."""

    diverge_after_tokens: int | None = None
    decode_gb_per_token: float | None = None
    hang_after_requests: int | None = None
    errors_above_running: int | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.diverge_after_tokens, self.decode_gb_per_token,
                                           self.hang_after_requests, self.errors_above_running))


def active(rules: tuple[FaultRule, ...], args: Mapping[str, Any]) -> ActiveFaults:
    """The first matching rule of each kind, for a configuration's resolved arguments."""
    first: dict[str, float] = {}
    for rule in rules:
        if rule.kind not in first and rule.matches(args):
            first[rule.kind] = rule.value
    as_int = {k: int(v) for k, v in first.items() if k != "decode-oom"}
    return ActiveFaults(as_int.get("wrong-output"), first.get("decode-oom"), as_int.get("hang"),
                        as_int.get("server-errors"))


def oom_batch(faults: ActiveFaults, headroom_gb: float, draft_tokens: int) -> int | None:
    """The smallest decode batch that runs out of memory (None: none does)."""
    if not faults.decode_gb_per_token:
        return None
    per_request = faults.decode_gb_per_token * max(draft_tokens, 1)
    return max(1, math.floor(max(headroom_gb, 0.0) / per_request) + 1)


def decode_oom_lines(need_gb: float, total_gb: float, free_gb: float) -> list[str]:
    return [SCHEDULER_EXCEPTION,
            DECODE_OOM.format(need=need_gb, total=total_gb, free=max(free_gb, 0.0)), SIGQUIT]


class FaultRuntime:
    """One configuration's faults as the engine asks about them while it runs."""

    def __init__(self, rules: tuple[FaultRule, ...], args: Mapping[str, Any], *,
                 free_for_graphs_gb: float, graph_gb: float, gpu_gb: float, draft_tokens: int,
                 on_fatal: Callable[[list[str]], object] | None = None) -> None:
        self.faults = active(rules, args)
        self.on_fatal = on_fatal
        # the scheduler died (a decode batch out of memory) or hangs: nothing more is served
        self.dead = False
        self.headroom_gb = free_for_graphs_gb - graph_gb
        self.gpu_gb = gpu_gb
        self.draft_tokens = max(draft_tokens, 1)
        self.oom_batch = oom_batch(self.faults, self.headroom_gb, draft_tokens)

    @classmethod
    def of(cls, rules: tuple[FaultRule, ...], config: Any,
           on_fatal: Callable[[list[str]], object] | None = None) -> FaultRuntime:
        """For a resolved ``tuner.simulator.config.ServerConfig``; ``on_fatal(lines)`` when the
        server dies."""
        memory = config.memory
        return cls(rules, config.args, free_for_graphs_gb=memory.free_for_graphs_gb,
                   graph_gb=memory.graph_gb,
                   gpu_gb=memory.gpu_gb, draft_tokens=config.draft_tokens, on_fatal=on_fatal)

    def stuck(self, batch: int | None, served: int) -> bool:
        """Whether the scheduler is dead or stuck now: a decode ``batch`` out of memory kills it
        (``on_fatal`` with the lines it logs), ``served`` requests past a hang fault's number stop
        it."""
        lines = self.oom_lines(batch) if batch is not None and not self.dead else None
        if lines is not None and self.on_fatal is not None:
            self.on_fatal(lines)
        self.dead = self.dead or lines is not None or self.hangs(served)
        return self.dead

    def hangs(self, served: int) -> bool:
        hang = self.faults.hang_after_requests
        return hang is not None and served >= hang

    def refuses(self, in_flight: int) -> bool:
        limit = self.faults.errors_above_running
        return limit is not None and in_flight >= limit

    def oom_lines(self, batch: int) -> list[str] | None:
        """What the server logs as it dies when ``batch`` runs out of memory, or None when it
        fits."""
        if self.oom_batch is None or batch < self.oom_batch:
            return None
        need = (self.faults.decode_gb_per_token or 0.0) * self.draft_tokens * batch
        return decode_oom_lines(need, self.gpu_gb, self.headroom_gb)
