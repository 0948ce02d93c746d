"""Landscape 9, MoE expert traffic in verification: every draft token verified routes to its own
experts, so at C=1 a tree pays for its draft tokens in expert weights read, and the optimum is a
middle top-k with a moderate draft — a tree no designed-start shape measures (they are chains and
top-k 4).

Physics (its own): EAGLE's draft as a beam — each level holds the target's token with probability
1 − (1 − α)^(k^0.5), 4 % less per deeper level; the verify budget bounds the depth at (draft − 1) ÷
k (+ 1 for a beam wider than one; a chain verifies steps + 1 tokens). A step costs a dense part,
the draft passes (more for a wider beam: ``width_ms`` per extra branch and step) and the expert
weights its verified tokens read: 1 − (1 − 8/128)^n of ``expert_ms`` for n tokens (8 of 128
experts each). At C=64 the batch reads every expert anyway; verification runs in waves of 128
tokens; the static fraction sets the KV pool (below 0.72 + 0.16 × 0.4 the batch shrinks), graph
sizes below the batch run part of it eagerly; out of memory at capture where graph size × draft
tokens outgrow what the static fraction leaves, and in decode where the batch's draft tokens
outgrow what is left after it (a run failure). 2.5 % noise.

``landscape``: α = 0.80, experts 8 ms, width 0.25 ms — the optimum 4/2/7 (any static fraction that
keeps the pool), the baseline's chain 0.954 of it and the best top-k 4 tree 0.886: TPE, random
search and the one-flag sweep all stay at the baseline for 40 trials. ``wide_close``: α = 0.75,
experts 6 ms, width 0.1 ms — the optimum 4/2/7 again, and the start's wide trees come within 0.962
of it, so a search that settles on one of them stays there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.landscapes._base import Failure, Phase, Point, RunFailure, model_landscape
from bench.landscapes.beam_tree import accept_length as beam_accept_length
from tuner.evaluation.landscape import MeasuredLandscape
from tuner.study.spec import StudySpec

DECAY = 0.96


@dataclass(frozen=True)
class ExpertTraffic:
    accept: float
    expert_ms: float
    width_ms: float

    def accept_length(self, p: Point) -> float:
        return beam_accept_length(p, self.accept, DECAY)  # beam_tree's law, its own numbers

    def __call__(self, p: Point, concurrency: int) -> Phase:
        capture_gb = 0.0011 * p.graph * p.draft
        free_gb = (1.0 - p.mem) * 96.0 - 6.0
        if capture_gb > free_gb:
            raise Failure("out-of-memory", "Capture cuda graph failed: CUDA out of memory")
        accept = self.accept_length(p)
        tokens = p.draft if p.topk > 1 else min(p.draft, p.steps + 1)
        if concurrency == 1:
            t_ms = (5.0 + p.steps * (0.7 + self.width_ms * (p.topk - 1))
                    + self.expert_ms * _experts(tokens))
            t_ms *= 1.0 + 0.01 * math.log2(p.graph / 16) / 3
            rate = 1000.0 * accept / t_ms
            return Phase(rate, rate, accept, 200.0)
        pool = max(0.0, p.mem - 0.72) / 0.16
        batch = min(concurrency, p.running, int(concurrency * min(1.0, 0.6 + pool)))
        if batch * tokens * 0.00035 > free_gb - capture_gb + 1.5:
            raise RunFailure("crashed-under-load", "decode-oom", "CUDA out of memory in decode")
        waves = math.ceil(batch * tokens / 128)
        t_ms = (22.0 + 1.6 * waves + p.steps * (1.0 + 0.4 * (p.topk - 1))
                + self.expert_ms * _experts(batch * tokens))
        eager = 1.0 if p.graph >= batch else 0.85 + 0.15 * p.graph / batch
        per_request = 1000.0 * accept / t_ms * eager
        return Phase(per_request, per_request * batch, accept,
                     150.0 + 2000.0 * (concurrency / batch - 1.0))


def _experts(tokens: float) -> float:
    """The share of 128 experts that ``tokens`` tokens, 8 experts each, read."""
    return 1.0 - (1.0 - 8 / 128) ** tokens


def landscape(spec: StudySpec) -> MeasuredLandscape:
    return model_landscape(spec, ExpertTraffic(0.80, 8.0, 0.25), noise=0.025)


def wide_close(spec: StudySpec) -> MeasuredLandscape:
    return model_landscape(spec, ExpertTraffic(0.75, 6.0, 0.1), noise=0.025)
