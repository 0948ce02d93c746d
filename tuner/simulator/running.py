"""A request in the engine's batch (tuner/simulator/engine.py): its state, and how many drafts each
verify step accepts.

Seeded randomness: acceptance is drawn per (seed, arrival number), so the same requests get the same
chunks. Acceptance sampling: the chain accepts at least k drafts with probability ``S_k =
p_1·…·p_k``, so one uniform u per iteration gives exactly the chain's distribution (accepted = the
largest k with u < S_k). The uniforms of one request are a randomized golden-ratio (Weyl) sequence
rather than independent draws: every iteration still has the chain's distribution, but a request's
total stays close to its expectation (independent draws made the mean speed of 8 requests of 128
tokens wander ±2 % around the model, one standard deviation).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tuner.simulator import model, text
from tuner.simulator.config import ServerConfig
from tuner.simulator.profile import Profile
from tuner.simulator.requests import GenerationRequest, RequestHandle

#: The Weyl sequence's step: 1/φ spreads consecutive points most evenly over [0, 1).
_GOLDEN = 0.6180339887498949


@dataclass(eq=False)
class Running:
    request: GenerationRequest
    handle: RequestHandle
    survival: tuple[float, ...]  # S_k = P(at least k drafts accepted), k = 1..depth
    u: float  # the request's position in its Weyl sequence of uniforms
    writer: text.TokenWriter
    reserved: int
    #: Prompt tokens still to prefill (a chunked request's rest; 0 once it decodes).
    prefill_left: int = 0
    generated: int = 0
    pending: int = 0  # tokens generated but not streamed yet (coalescing, --stream-interval)
    since_chunk: int = 0  # decode iterations since the last chunk
    chunk_at_ms: float = 0.0  # simulated time of the last chunk
    verify_ct: int = 0
    correct: int = 0
    histogram: list[int] = field(default_factory=list)
    cancelled: bool = False

    def accept(self, steps: int | None) -> int:
        """The drafts one verify step accepts (at most ``steps``): the next uniform of the request's
        Weyl sequence, against the chain's survival probabilities."""
        self.u = (self.u + _GOLDEN) % 1.0
        accepted = 0
        for s_k in self.survival[:steps]:
            if self.u >= s_k:
                break
            accepted += 1
        return accepted

    def record(self, n: int) -> None:
        """One verify step that gave ``n`` tokens (1 + the accepted drafts, cut at the output's
        end)."""
        self.verify_ct += 1
        self.correct += n - 1
        while len(self.histogram) <= n - 1:
            self.histogram.append(0)
        self.histogram[n - 1] += 1


def first_uniform(seed: int, number: str) -> float:
    """Where the request's Weyl sequence starts: seeded by the study seed and its arrival number."""
    return random.Random(text.stable_hash("accept", seed, number)).random()


def survival(profile: Profile, config: ServerConfig, temperature: float,
             multiplier: float) -> tuple[float, ...]:
    """``S_k`` = P(at least k drafts accepted), k = 1..depth of the chain."""
    # adaptive.py
    depth = config.adaptive.max_steps if config.adaptive is not None else None
    rates = model.position_rates(profile, config, temperature=temperature,
                                 multiplier=multiplier, chain=depth)
    out, chain = [], 1.0
    for p in rates:
        chain *= p
        out.append(chain)
    return tuple(out)
