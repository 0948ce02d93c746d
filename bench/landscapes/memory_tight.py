"""Held-out landscape 1, memory-tight: a large OOM region, and the trees that pay need small CUDA
graphs.

Physics (not the simulator's): CUDA-graph workspace grows with graph batch × draft tokens × tree
width and must fit beside the static pool, so OOM is monotone in mem-fraction × graph size × draft
tokens; the KV pool left by the memory fraction caps the running batch at C=64 (retraction shows up
as TTFT, which the study constrains); a batch above the graph size runs eagerly (1.5× slower).
Acceptance averages three request classes of different predictability, each a per-depth hit
probability that widens with topk (1 − (1 − α)^(k^0.7)), over the depth the draft tokens can cover
(d / √k). Iteration cost is a roofline: max(memory-bound floor, compute ∝ batch × tree tokens) plus
the draft model's steps.
"""

from __future__ import annotations

import math

from bench.landscapes._base import Failure, Phase, Point, model_landscape
from tuner.evaluation.landscape import MeasuredLandscape
from tuner.study.spec import StudySpec

_CLASSES = ((0.3, 0.5), (0.4, 0.68), (0.3, 0.82))  # (share of requests, per-token acceptance)


def accept_length(p: Point) -> float:
    depth = min(float(p.steps), p.draft / math.sqrt(p.topk))
    total = 0.0
    for share, alpha in _CLASSES:
        hit = 1.0 - (1.0 - alpha) ** (p.topk ** 0.7)
        whole = int(depth)
        chain = sum(hit ** i for i in range(1, whole + 1)) + (depth - whole) * hit ** (whole + 1)
        total += share * (1.0 + chain)
    return total


def model(p: Point, concurrency: int) -> Phase:
    graph_share = p.graph * p.draft * (1.0 + 0.15 * p.topk) * 1.2e-4
    if p.mem + graph_share > 0.955:
        raise Failure("out-of-memory",
                      f"CUDA graph capture: tried to allocate {graph_share:.2f} of the GPU")
    kv_requests = (p.mem - 0.74) * 900 / (1.0 + p.draft / 64)
    if kv_requests < 24:
        raise Failure("out-of-memory", "KV cache pool too small for the running batch")
    accept = accept_length(p)
    if concurrency == 1:
        t_ms = max(11.0, 0.11 * p.draft * (1.0 + 0.1 * p.topk)) + 1.1 * p.steps
        rate = 1000.0 * accept / t_ms
        return Phase(rate, rate, accept, 300.0)
    wanted = min(concurrency, p.running)
    batch = min(wanted, kv_requests)
    t_ms = max(20.0 + 1.2 * p.steps, 0.012 * batch * p.draft * (1.0 + 0.1 * p.topk)) + 0.8 * p.steps
    if batch > p.graph:
        t_ms *= 1.5
    per_request = 1000.0 * accept / t_ms
    ttft = (600.0 + 3000.0 * (concurrency / batch - 1.0)
            + 5000.0 * max(0.0, 1.0 - kv_requests / wanted))
    return Phase(per_request, per_request * batch, accept, ttft)


def landscape(spec: StudySpec) -> MeasuredLandscape:
    return model_landscape(spec, model)
