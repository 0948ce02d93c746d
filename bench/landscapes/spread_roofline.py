"""Held-out landscape 4, written after the search was tuned and used only to check it: acceptance
spread over requests, a compute roofline with 128-token tiles, eager decoding above the graph size,
and a KV pool that the weights leave little of.

Physics (neither the simulator's nor the other landscapes'): each request has its own per-token
acceptance probability (a mixture: hard, typical and easy prompts); top-k raises a position's
acceptance as 1 − (1 − α)^(k^0.35); the draft tokens bound how deep the verified tree reaches (√k
nodes per level). At C=1 the target is memory-bound (a fixed cost plus tree attention per token); at
C=64 it is compute-bound on batch × draft tokens, rounded up to 128-token tiles; every draft step
costs a kernel launch plus batch × top-k work. A batch larger than the CUDA-graph size runs eagerly
(1.5× slower per step). Graph capture needs memory outside the static pool in proportion to graph
size × draft tokens; the KV pool is what the static fraction leaves after the weights, and a pool
too small for the running requests retracts (slow and a TTFT beyond any constraint).
"""

from __future__ import annotations

import math

from bench.landscapes._base import Failure, Phase, Point, model_landscape
from tuner.evaluation.landscape import MeasuredLandscape
from tuner.study.spec import StudySpec

#: (share of requests, per-token acceptance) of the workload's prompts.
PROMPTS = ((0.3, 0.45), (0.5, 0.7), (0.2, 0.8))
GPU_GB = 96.0
WEIGHTS_GB = 68.0


def accept_length(p: Point) -> float:
    depth = min(float(p.steps), (p.draft - 1) / math.sqrt(p.topk))
    whole = math.floor(depth)
    total = 0.0
    for share, alpha in PROMPTS:
        a = 1.0 - (1.0 - alpha) ** (p.topk ** 0.35)
        chain = sum(a ** i for i in range(1, whole + 1)) + (depth - whole) * a ** (whole + 1)
        total += share * (1.0 + chain)
    return total


def model(p: Point, concurrency: int) -> Phase:
    graph_gb = 0.0016 * p.graph * p.draft
    free_gb = (1.0 - p.mem) * GPU_GB - 5.0
    if graph_gb > free_gb:
        raise Failure("out-of-memory", f"CUDA graph capture: tried to allocate {graph_gb:.1f} GB")
    kv_tokens = (p.mem * GPU_GB - WEIGHTS_GB) * 9000.0
    accept = accept_length(p)
    if concurrency == 1:
        t_ms = 11.0 + 0.15 * p.draft + 0.9 * p.steps
        rate = 1000.0 * accept / t_ms
        return Phase(rate, rate, accept, 300.0)
    batch = min(concurrency, p.running)
    tokens = batch * p.draft
    t_ms = (max(11.0, 0.021 * 128 * math.ceil(tokens / 128))
            + p.steps * (0.8 + 0.0009 * batch * p.topk))
    if batch > p.graph:
        t_ms *= 1.5
    ttft = 900.0 + 20.0 * p.draft + 3000.0 * (concurrency / batch - 1.0)
    if kv_tokens < batch * (1400 + 4 * p.draft):
        t_ms *= 1.6
        ttft += 6000.0
    per_request = 1000.0 * accept / t_ms
    return Phase(per_request, per_request * batch, accept, ttft)


def landscape(spec: StudySpec) -> MeasuredLandscape:
    return model_landscape(spec, model)
