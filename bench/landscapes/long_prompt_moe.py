"""Landscape 6 (issue 27), long-prompt MoE: 6k-token prompts on a MoE model, C=64 decided by running
requests × the static memory fraction, evicted requests prefilled again, and out of memory *during
decode*.

Physics (neither the simulator's nor the other landscapes'):

* **Acceptance** over three prompt classes, lower on long contexts and decaying with depth
  (α·0.96^d); top-k widens a level as 1 − (1 − α)^(k^0.5); the draft tokens bound the depth as
  (draft − 1) ÷ k^0.6.
* **MoE expert traffic**: a verification of n tokens reads the experts they route to — a share
  1 − (1 − 8/128)^n of the expert weights — so at C=1 each draft token costs the new experts it
  touches (a steep, then saturating cost); at C=64 every expert is read and the step is a roofline
  over batch × draft tokens in waves of 256.
* **Prefill interference**: each finished request is replaced by one whose 6,000-token prompt is
  prefilled in chunks between decode steps; faster decoding means more prefill per second (C=64 half
  prefill-bound).
* **KV capacity**: the static pool after the weights holds ``capacity`` requests of 6.5k tokens.
  Admitting more (``--max-running-requests`` above it) evicts requests mid-decode: each is prefilled
  again (time and TTFT); admitting fewer than 64 queues the rest (TTFT). So C=64 is decided by
  running requests × memory fraction.
* **Memory outside the static pool**: CUDA-graph workspace (graph × draft × width) must fit at
  start-up (else out of memory in capture); at C=64 the decode activations of batch × draft tokens
  come on top — beyond the free memory the server dies under load (a decode OOM, a run failure), so
  a large static fraction limits the draft a C=64 batch can carry.

Its own objective (C=1 0.4, C=64 0.6: a batch deployment) and constraints (no errors; C=64 TTFT p99
< 20 s) are carried by the landscape (docs/benchmarks.md); any study with the six flags of the seed
space runs on it.
"""

from __future__ import annotations

import math

from bench.landscapes._base import Failure, Phase, Point, RunFailure, model_landscape
from tuner.evaluation.landscape import MeasuredLandscape, make_objective
from tuner.study.spec import StudySpec

PROMPT_TOKENS = 6000
PROMPTS = ((0.3, 0.42), (0.5, 0.62), (0.2, 0.78))  # (share of requests, per-token acceptance)
GPU_GB = 96.0
WEIGHTS_GB = 62.0
REQUEST_GB = 0.40  # KV of one 6.5k-token request per GPU
RESERVE_GB = 3.0
PREFILL_MS = 42.0  # one 6k-token prompt, chunked, in ms of GPU time


def accept_length(p: Point) -> float:
    depth = min(float(p.steps), (p.draft - 1) / p.topk ** 0.6)
    whole = math.floor(depth)
    total = 0.0
    for share, alpha in PROMPTS:
        hits = [1.0 - (1.0 - alpha * 0.96 ** d) ** math.sqrt(p.topk) for d in range(whole + 1)]
        chain, run = 0.0, 1.0
        for d in range(whole):
            run *= hits[d]
            chain += run
        chain += (depth - whole) * run * hits[whole]
        total += share * (1.0 + chain)
    return total


def expert_share(tokens: float) -> float:
    return 1.0 - (1.0 - 8 / 128) ** tokens


def model(p: Point, concurrency: int) -> Phase:
    free_gb = (1.0 - p.mem) * GPU_GB - RESERVE_GB
    graph_gb = 0.0024 * p.graph * p.draft * (1.0 + 0.1 * p.topk)
    if graph_gb > free_gb:
        raise Failure("out-of-memory",
                      f"Capture cuda graph failed: CUDA out of memory ({graph_gb:.1f} GB)")
    capacity = math.floor((p.mem * GPU_GB - WEIGHTS_GB) / REQUEST_GB)
    if capacity < 16:
        raise Failure("out-of-memory",
                      "Not enough memory. Please try to increase --mem-fraction-static.")
    accept = accept_length(p)
    if concurrency == 1:
        t_ms = 9.0 + 16.0 * expert_share(p.draft) + 0.02 * p.draft + 0.7 * p.steps
        rate = 1000.0 * accept / t_ms
        return Phase(rate, rate, accept, 900.0)
    admitted = min(concurrency, p.running)
    batch = min(admitted, capacity)
    activations_gb = 0.0011 * batch * p.draft * (1.0 + 0.15 * p.topk)
    if graph_gb + activations_gb > free_gb:
        raise RunFailure("crashed-under-load", "decode-oom",
                         f"torch.OutOfMemoryError: CUDA out of memory at a decode batch of {batch}")
    tokens = batch * p.draft
    t_ms = max(25.0, 9.0 + 16.0
               + 0.011 * 256 * math.ceil(tokens / 256)) + p.steps * (0.7 + 0.003 * batch * p.topk)
    if batch > p.graph:
        t_ms *= 1.35  # eager decode above the captured batch
    # share of admitted requests evicted and prefilled again
    evicted = max(0, admitted - capacity) / admitted
    prefill_per_request = PREFILL_MS * (1.0 + 2.5 * evicted)
    # Requests finish at batch × accept ÷ 512 per step; each is replaced by a prefill between steps.
    step_ms = t_ms + batch * accept / 512 * prefill_per_request
    per_request = 1000.0 * accept / step_ms
    service_s = 512 / per_request
    ttft = 1500.0 + 1000.0 * service_s * (concurrency / batch - 1.0) + 30000.0 * evicted
    return Phase(per_request, per_request * batch, accept, ttft)


def landscape(spec: StudySpec) -> MeasuredLandscape:
    made = model_landscape(spec, model, noise=0.025)
    return MeasuredLandscape(spec, made.make_measurer, truth=made.truth_measurer,
                             objective=make_objective({1: 0.4, 64: 0.6},
                                                      ["error_rate <= 0.01",
                                                       "c64.ttft_p99_ms < 20000"],
                                                      concurrencies=[1, 64]))
