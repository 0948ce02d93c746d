"""SGLang's adaptive speculative steps (``--speculative-adaptive``, sgl-project/sglang#21599, per
batch-size tier since #24055), as SGLang 0.5.23's ``srt/speculative/adaptive_spec_params.py`` runs
it.

Each batch-size tier (a key of the config: the batch, padded up to a captured CUDA-graph size, goes
to the largest key not above it) keeps its own slot: an EMA (α = 0.2) of the accepted drafts per
request, updated after every verify while the slot's steps are above zero; after ``warmup_batches``
(10) verifies it re-picks its steps every ``update_interval`` (5) verifies: down while the EMA is at
most the next lower candidate − 0.5 (+ the down hysteresis; 0.5 to reach 0), else up while it is
above the current steps − 0.5 (+ the up hysteresis); from 0 it always probes the next candidate. A
switch swaps the draft's runtime state (its CUDA-graph set), which costs the profile's ``[adaptive]
switch_ms``.

``steady_mix`` runs a slot on the expected accept lengths (no noise) until it settles and returns
the share of iterations at each step count: what the ground truth composes its figures from.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: SGLang 0.5.23's ``DEFAULT_ADAPTIVE_CONFIG``.
DEFAULT_CONFIG: dict[str, dict[str, Any]] = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25,
          "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
          "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
           "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
           "ceiling_coeff": 0},
}


class AdaptiveConfigError(ValueError):
    """A ``--speculative-adaptive-config`` SGLang refuses at startup (its own message)."""


@dataclass(frozen=True)
class Tier:
    batch: int
    candidate_steps: tuple[int, ...]
    ema_alpha: float = 0.2
    update_interval: int = 5
    warmup_batches: int = 10
    up_hysteresis: float = 0.0
    down_hysteresis: float = -0.25
    ceiling_coeff: float = 0.0


@dataclass(frozen=True)
class AdaptiveConfig:
    tiers: tuple[Tier, ...]  # by batch, ascending
    initial_steps: int

    @property
    def candidate_steps(self) -> tuple[int, ...]:
        """Union over tiers: what SGLang sizes its buffers and graphs for (and checks
        --speculative-num-steps against)."""
        return tuple(sorted({s for t in self.tiers for s in t.candidate_steps}))

    @property
    def max_steps(self) -> int:
        return max(self.candidate_steps)

    def tier_index(self, batch: int, graph_bs: Sequence[int] = ()) -> int:
        """``_route``: pad the batch to a captured graph size, then the closest tier key not above
        it."""
        padded = batch
        if graph_bs:
            ladder = sorted(graph_bs)
            i = bisect.bisect_left(ladder, batch)
            padded = ladder[i] if i < len(ladder) else batch
        keys = [t.batch for t in self.tiers]
        return max(0, bisect.bisect_right(keys, padded) - 1)


def parse_config(data: Mapping[str, Any], initial_steps: int | None) -> AdaptiveConfig:
    """``_load_adaptive_config`` (same checks, same messages) and the initial steps SGLang
    resolves."""
    tiers = []
    shared = {k: v for k, v in data.items() if not str(k).isdigit()}
    for key, entry in data.items():
        if not str(key).isdigit():
            continue
        steps = entry.get("candidate_steps") if isinstance(entry, Mapping) else None
        if not isinstance(steps, list) or not steps or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps):
            raise AdaptiveConfigError(
                f"ValueError: BS {key}: candidate_steps must be a list of non-negative ints, "
                f"got {steps!r}")
        merged = {**shared, **entry}
        tiers.append(Tier(
            batch=int(key), candidate_steps=tuple(sorted(set(steps))),
            ema_alpha=float(merged.get("ema_alpha", 0.2)),
            update_interval=int(merged.get("update_interval", 5)),
            warmup_batches=int(merged.get("warmup_batches", 10)),
            up_hysteresis=float(merged.get("up_hysteresis", 0.0)),
            down_hysteresis=float(merged.get("down_hysteresis", -0.25)),
            ceiling_coeff=float(merged.get("ceiling_coeff", 0))))
    if not tiers:
        raise AdaptiveConfigError(
            "ValueError: speculative_adaptive_config must contain at least one integer-string BS "
            "key, e.g. "
            f'{{"1": {{"candidate_steps": [1,3,7]}}}}. Got keys: {list(data)}')
    tiers.sort(key=lambda t: t.batch)
    union = sorted({s for t in tiers for s in t.candidate_steps})
    steps = union[len(union) // 2] if initial_steps is None else initial_steps
    if steps not in union:
        raise AdaptiveConfigError(
            f"ValueError: --speculative-num-steps={steps} is not in the adaptive config "
            f"candidate_steps {union}. Pass one of those values.")
    return AdaptiveConfig(tuple(tiers), steps)


def load_config(path: str | None, initial_steps: int | None) -> AdaptiveConfig:
    """The default config, or the JSON file ``--speculative-adaptive-config`` names."""
    if path is None:
        return parse_config(DEFAULT_CONFIG, initial_steps)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AdaptiveConfigError("FileNotFoundError: [Errno 2] No such file or directory: "
                                  f"{path!r}") from None
    except (OSError, ValueError) as exc:
        raise AdaptiveConfigError(f"json.decoder.JSONDecodeError: {exc}") from None
    if not isinstance(data, dict):
        raise AdaptiveConfigError(
            f"AttributeError: {type(data).__name__!r} object has no attribute 'items'")
    return parse_config(data, initial_steps)


class Slot:
    """``AdaptiveStepSlot``: one tier's EMA and current steps."""

    def __init__(self, tier: Tier, initial_steps: int) -> None:
        self.tier = tier
        c = tier.candidate_steps
        self.steps = initial_steps if initial_steps in c else c[len(c) // 2]
        self.ema = float(self.steps - 1)
        self._count = 0

    def update(self, correct: Sequence[float]) -> bool:
        """Feed one verify's accepted drafts per request; True when the steps changed."""
        if not correct:
            return False
        t = self.tier
        if self.steps > 0:
            self.ema = (1 - t.ema_alpha) * self.ema + t.ema_alpha * (sum(correct) / len(correct))
        self._count += 1
        if self._count <= t.warmup_batches or (self._count - t.warmup_batches) % t.update_interval:
            return False
        return self._recompute()

    def _recompute(self) -> bool:
        c, t = self.tier.candidate_steps, self.tier
        old = self.steps
        i = old_i = c.index(old)
        if old == 0:
            i = min(i + 1, len(c) - 1)
            if c[i] > 0 and self.ema < 0:
                self.ema = float(c[i] - 1)
            return self._apply(c[i])
        while i > 0:
            threshold = (0.5 if c[i - 1] == 0 else c[i - 1] - 0.5) + t.down_hysteresis
            if self.ema > threshold:
                break
            i -= 1
        if i == old_i:
            while i < len(c) - 1 and self.ema > c[i] - 0.5 + t.up_hysteresis:
                i += 1
        target = c[i]
        if t.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema * t.ceiling_coeff))
            if ceiling < target <= old:
                while i > 0 and c[i] > ceiling:
                    i -= 1
                target = c[i]
        return self._apply(target)

    def _apply(self, target: int) -> bool:
        changed = target != self.steps
        self.steps = target
        return changed


class Controller:
    """``AdaptiveSpeculativeParams``: a slot per tier, routed by batch size."""

    def __init__(self, config: AdaptiveConfig, graph_bs: Sequence[int] = ()) -> None:
        self.config = config
        self.graph_bs = tuple(sorted(graph_bs))
        self.slots = [Slot(t, config.initial_steps) for t in config.tiers]
        self.switches = 0

    def steps_for(self, batch: int) -> int:
        return self.slots[self.config.tier_index(batch, self.graph_bs)].steps

    def on_verify(self, correct: Sequence[float], batch: int) -> str | None:
        """SGLang's log line when this verify made the batch's slot switch, else None."""
        slot = self.slots[self.config.tier_index(batch, self.graph_bs)]
        old = slot.steps
        if not slot.update(correct):
            return None
        self.switches += 1
        return (f"Adaptive spec params updated: steps {old} -> {slot.steps} "
                f"(ema_accept_len={slot.ema:.2f})")


#: Verifies ``steady_mix`` plays, and how many of the last it counts.
_PLAY, _COUNT = 600, 300


def steady_mix(tier: Tier, initial_steps: int,
               accepted: Callable[[int], float]) -> tuple[dict[int, float], float]:
    """(share of iterations per step count, switches per iteration) of a slot fed the expected
    accepted drafts ``accepted(steps)`` at every verify, once it has settled."""
    slot = Slot(tier, initial_steps)
    seen: dict[int, int] = {}
    switches = 0
    for n in range(_PLAY):
        steps = slot.steps
        changed = slot.update([accepted(steps) if steps > 0 else 0.0])
        if n >= _PLAY - _COUNT:
            seen[steps] = seen.get(steps, 0) + 1
            switches += changed
    return {s: k / _COUNT for s, k in sorted(seen.items())}, switches / _COUNT
