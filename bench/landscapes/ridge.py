"""Held-out landscape 3, a ridge: the best draft-token count moves with CUDA-graph size and max
running requests.

Physics (not the simulator's): a decode step at C=64 is captured in a CUDA graph only while batch ×
draft tokens fits the graph's token budget (6 × graph batch) and the batch fits the graph; otherwise
it runs eagerly (1.6× slower). C=1 wants many draft tokens, C=64 wants batch × draft under the
budget, so the best draft count is ≈ 6 × graph ÷ min(64, max running requests). Acceptance is a
geometric chain per request class over the depth the tree covers. Graph memory is taken beside the
static pool (OOM above a line in memory fraction × graph size); a small KV pool with 96 running
requests retracts (errors, a constraint).
"""

from __future__ import annotations

from bench.landscapes._base import Failure, Phase, Point, model_landscape
from tuner.evaluation.landscape import MeasuredLandscape
from tuner.study.spec import StudySpec

_CLASSES = ((0.3, 0.6), (0.4, 0.75), (0.3, 0.88))


def accept_length(p: Point) -> float:
    depth = min(float(p.steps), p.draft / (1.0 + 0.6 * (p.topk - 1)))
    total = 0.0
    for share, alpha in _CLASSES:
        a = 1.0 - (1.0 - alpha) ** (1.0 + 0.4 * (p.topk - 1))
        total += share * (1.0 - a ** (depth + 1.0)) / (1.0 - a)
    return total


def model(p: Point, concurrency: int) -> Phase:
    if p.mem + 0.0004 * p.graph > 0.95:
        raise Failure("out-of-memory", "CUDA graph capture out of memory")
    accept = accept_length(p)
    if concurrency == 1:
        t_ms = max(9.0, 0.35 * p.draft) + 0.9 * p.steps
        rate = 1000.0 * accept / t_ms
        return Phase(rate, rate, accept, 250.0)
    batch = min(concurrency, p.running)
    t_ms = max(22.0, 0.03 * batch * p.draft) + 1.1 * p.steps
    if batch * p.draft > 6 * p.graph or batch > p.graph:
        t_ms *= 1.6
    per_request = 1000.0 * accept / t_ms
    errors = 0.03 if p.running >= 96 and p.mem < 0.83 else 0.0
    ttft = 900.0 + 4000.0 * (concurrency / batch - 1.0)
    return Phase(per_request, per_request * batch, accept, ttft, errors)


def landscape(spec: StudySpec) -> MeasuredLandscape:
    return model_landscape(spec, model)
