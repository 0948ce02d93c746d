"""Landscape 8, an explicit beam tree where width buys little: the optimum is top-k 2 at a middle
depth, the widest trees of the designed start come close (0.93), and the baseline's chain is 9 %
below — a case for "spaces where the tree is not what the models expect".

Physics (its own): EAGLE's draft as a beam search — each level keeps the best of top-k candidates,
accepted with probability 1 − (1 − 0.85)^(k^0.5), 3 % less at every deeper level; the verify
budget bounds the depth at (draft − 1) ÷ k levels (+ 1 for a beam wider than one), so past that
more draft tokens verify nothing new. A draft pass costs 0.9 ms + 0.1 ms per extra branch for each
step; verification grows with the tokens verified (0.08 ms each at C=1, 0.01 ms per token of the
batch at C=64). At C=64 the static fraction sets the KV pool (below 0.79 the batch shrinks), a
running cap of 48 queues the rest, graph sizes below the batch run part of it eagerly and large
graph sizes take memory from the pool; the largest graphs at the top fractions run out of memory in
capture. 2.5 % noise.
"""

from __future__ import annotations

from bench.landscapes._base import Failure, Phase, Point, model_landscape
from tuner.evaluation.landscape import MeasuredLandscape
from tuner.study.spec import StudySpec

ACCEPT = 0.85
DECAY = 0.97


def accept_length(p: Point, accept: float = ACCEPT, decay: float = DECAY) -> float:
    """The beam's accept length: each level holds the target's token with 1 − (1 − accept)^(k^0.5),
    ``decay`` less per deeper level; as deep as the steps and the verify budget allow."""
    hit = 1.0 - (1.0 - accept) ** (p.topk ** 0.5)
    depth = min(float(p.steps), (p.draft - 1) / p.topk + (1.0 if p.topk > 1 else 0.0))
    full = int(depth)
    accepted, reach = 1.0, 1.0
    for level in range(full):
        reach *= hit * decay ** level
        accepted += reach
    return accepted + (depth - full) * reach * hit * decay ** full


def model(p: Point, concurrency: int) -> Phase:
    if p.mem >= 0.91 and p.graph >= 96:
        raise Failure("out-of-memory", "Capture cuda graph failed: CUDA out of memory")
    accept = accept_length(p)
    if concurrency == 1:
        t_ms = 6.0 + p.steps * (0.9 + 0.1 * (p.topk - 1)) + 0.08 * p.draft
        rate = 1000.0 * accept / t_ms
        return Phase(rate, rate, accept, 100.0)
    pool = max(0.0, p.mem - 0.70) / 0.20
    batch = min(concurrency, p.running, int(concurrency * min(1.0, 0.55 + pool)))
    t_ms = 18.0 + p.steps * (1.2 + 0.6 * (p.topk - 1)) + 0.01 * batch * p.draft
    eager = 1.0 if p.graph >= batch else 0.8 + 0.2 * p.graph / batch
    graph_memory = 1.0 - 0.004 * max(0, p.graph - 64) / 32
    per_request = 1000.0 * accept / t_ms * eager * graph_memory
    ttft = 100.0 + 2000.0 * (concurrency / batch - 1.0)
    return Phase(per_request, per_request * batch, accept, ttft)


def landscape(spec: StudySpec) -> MeasuredLandscape:
    return model_landscape(spec, model, noise=0.025)
