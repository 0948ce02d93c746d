"""Landscape 8 (issue 27), prefill-bound C=64: 3k-token prompts make the C=64 phase mostly prefill,
so what decides the score is how much GPU the scheduler leaves to prefill — the captured batch, the
running requests and the memory — far more than the draft tree, whose tokens compete with prefill
for compute.

Physics (its own): a dense model, compute-bound at C=64 on prefill chunks + batch × draft
verification tokens; speculation pays at C=1 (memory-bound) and costs at C=64 (every draft token is
compute a prefill chunk needed), so the two phases pull the tree in opposite directions and the
weights (C=1 0.3, C=64 0.7, this landscape's own objective) put the C=64 side first. The captured
batch must hold the decode batch (else eager, 1.3× slower) but costs memory outside the static pool
∝ graph × draft; the static pool holds ``capacity`` running requests of 3.5k tokens, and admitting
more evicts and prefills again. A decode batch whose verification activations do not fit next to the
graphs dies under load (out of memory in decode).
"""

from __future__ import annotations

import math

from bench.landscapes._base import Failure, Phase, Point, RunFailure, model_landscape
from tuner.evaluation.landscape import MeasuredLandscape, make_objective
from tuner.study.spec import StudySpec

PROMPT_TOKENS = 3000
GPU_GB = 96.0
WEIGHTS_GB = 64.0


def accept_length(p: Point) -> float:
    depth = min(float(p.steps), (p.draft - 1) / p.topk ** 0.7)
    total = 0.0
    for share, alpha in ((0.5, 0.55), (0.5, 0.75)):
        a = 1.0 - (1.0 - alpha) ** (p.topk ** 0.4)
        whole = math.floor(depth)
        total += share * (1.0 + sum(a ** i for i in range(1, whole + 1))
                          + (depth - whole) * a ** (whole + 1))
    return total


def model(p: Point, concurrency: int) -> Phase:
    free_gb = (1.0 - p.mem) * GPU_GB - 4.0
    graph_gb = 0.0011 * p.graph * p.draft
    if graph_gb > free_gb:
        raise Failure("out-of-memory", "Capture cuda graph failed: CUDA out of memory")
    capacity = math.floor((p.mem * GPU_GB - WEIGHTS_GB) / 0.22)
    accept = accept_length(p)
    if concurrency == 1:
        t_ms = 14.0 + 0.12 * p.draft + 0.8 * p.steps
        rate = 1000.0 * accept / t_ms
        return Phase(rate, rate, accept, 500.0)
    admitted = min(concurrency, p.running)
    batch = min(admitted, capacity)
    if graph_gb + 0.0016 * batch * p.draft > free_gb:
        raise RunFailure("crashed-under-load", "decode-oom",
                         f"CUDA out of memory at a decode batch of {batch}")
    evicted = max(0, admitted - capacity) / admitted
    # Per decode step: verification of batch × draft tokens, the draft model, and the prefill of the
    # requests that finished meanwhile (batch × accept ÷ 512 of them), all compute-bound.
    prefill_tokens = batch * accept / 512 * PROMPT_TOKENS * (1.0 + 2.0 * evicted)
    t_ms = (8.0 + 0.0045 * (batch * p.draft + prefill_tokens)
            + p.steps * (0.6 + 0.002 * batch * p.topk))
    if batch > p.graph:
        t_ms += 0.3 * (8.0 + 0.0045 * batch * p.draft)  # the decode part runs eagerly
    per_request = 1000.0 * accept / t_ms
    ttft = 1200.0 + 1000.0 * 512 / per_request * (concurrency / batch - 1.0) + 20000.0 * evicted
    return Phase(per_request, per_request * batch, accept, ttft)


def landscape(spec: StudySpec) -> MeasuredLandscape:
    made = model_landscape(spec, model, noise=0.025)
    objective = make_objective({1: 0.3, 64: 0.7},
                               ["error_rate <= 0.01", "c64.ttft_p99_ms < 15000"],
                               concurrencies=[1, 64])
    return MeasuredLandscape(spec, made.make_measurer, truth=made.truth_measurer,
                             objective=objective)
