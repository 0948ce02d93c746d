"""Held-out landscape 2, a predictable workload where a deep, wide tree wins.

Physics (not the simulator's): acceptance saturates exponentially in the depth the tree covers and
grows with log2(topk) (code edits: most tokens are predictable); verification pays tree attention in
8-token tiles (cost steps at 8, 16, 24, 32 tokens), so the best draft count sits on a tile edge; the
draft model is cheap per step. Memory is benign: only the largest graphs at the highest memory
fraction fail to start, and the smallest KV pool with 96 running requests.
"""

from __future__ import annotations

import math

from bench.landscapes._base import Failure, Phase, Point, model_landscape
from tuner.evaluation.landscape import MeasuredLandscape
from tuner.study.spec import StudySpec


def accept_length(p: Point) -> float:
    depth = min(float(p.steps), p.draft / (1.0 + 0.35 * (p.topk - 1)))
    width = 1.0 + 0.22 * math.log2(p.topk)
    return min(float(p.draft), 1.0 + 6.5 * (1.0 - math.exp(-depth / 3.2)) * width)


def model(p: Point, concurrency: int) -> Phase:
    if p.mem >= 0.91 and p.graph >= 96:
        raise Failure("out-of-memory", "CUDA graph capture out of memory")
    if p.mem <= 0.79 and p.running >= 96:
        raise Failure("out-of-memory", "KV cache pool too small for max-running-requests")
    accept = accept_length(p)
    tiles = math.ceil(p.draft / 8)
    if concurrency == 1:
        t_ms = 9.0 + 1.5 * tiles + 0.55 * p.steps
        rate = 1000.0 * accept / t_ms
        return Phase(rate, rate, accept, 250.0)
    batch = min(concurrency, p.running)
    t_ms = max(24.0,
               0.0035 * batch * tiles * 8 * (1.0 + 0.05 * p.topk)) + 0.9 * p.steps + 1.2 * tiles
    if batch > p.graph:
        t_ms *= 1.35
    per_request = 1000.0 * accept / t_ms
    ttft = 700.0 + 45.0 * p.draft + 2500.0 * (concurrency / batch - 1.0)
    return Phase(per_request, per_request * batch, accept, ttft)


def landscape(spec: StudySpec) -> MeasuredLandscape:
    return model_landscape(spec, model)
