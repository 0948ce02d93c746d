"""Landscape 7 (issue 27), small separable gains: the tree is settled early; what is left is a few
per cent in each of the memory and scheduling flags, at the far ends of their ranges — where a
search that stays near its best trial rarely looks, and a one-flag-at-a-time sweep walks straight
to.

Physics (its own): acceptance is a saturating chain (α = 0.7, a deeper tree pays little past 4
levels, top-k 2 adds a little); the step cost grows with the draft tokens and the steps. Around
that, each other flag has its own smooth effect and little interaction: a smaller static fraction
leaves the allocator headroom (fewer fragmentation stalls: up to 4 % at the lowest fraction, but
below 0.80 the KV pool retracts at C=64); a small captured batch (16) keeps the graphs in
L2-friendly buckets (C=64 runs mixed graph + eager bucketing: 3 % at 16, none at 128); fewer running
requests (48) queue the rest but decode faster (5 % at C=64, TTFT allowed). Start-up fails only
where graph size × draft tokens outgrow the memory the static fraction leaves.
"""

from __future__ import annotations

import math

from bench.landscapes._base import Failure, Phase, Point, model_landscape
from tuner.evaluation.landscape import MeasuredLandscape
from tuner.study.spec import StudySpec


def accept_length(p: Point) -> float:
    depth = min(float(p.steps), (p.draft - 1) / p.topk ** 0.5)
    hit = 0.7 + 0.06 * math.log2(p.topk)
    return 1.0 + hit * (1.0 - hit ** depth) / (1.0 - hit)


def model(p: Point, concurrency: int) -> Phase:
    if 0.0009 * p.graph * p.draft > (1.0 - p.mem) * 96.0 - 4.0:
        raise Failure("out-of-memory", "Capture cuda graph failed: CUDA out of memory")
    accept = accept_length(p)
    headroom = 1.0 + 0.04 * (0.92 - p.mem) / 0.14  # allocator headroom: up to 4 %
    if concurrency == 1:
        t_ms = 12.0 + 0.22 * p.draft + 0.9 * p.steps
        rate = 1000.0 * accept / t_ms * headroom
        return Phase(rate, rate, accept, 400.0)
    batch = min(concurrency, p.running)
    t_ms = max(22.0, 0.018 * batch * p.draft) + p.steps * (0.9 + 0.002 * batch * p.topk)
    t_ms *= 1.0 + 0.03 * math.log2(p.graph / 16) / 3  # graph bucketing: 16 best
    t_ms *= 1.0 - 0.05 * (64 - batch) / 16  # a smaller running batch decodes faster per request
    if p.mem < 0.80:
        t_ms *= 1.25  # the KV pool retracts
    per_request = 1000.0 * accept / t_ms * headroom
    ttft = 800.0 + 2500.0 * (concurrency / batch - 1.0)
    return Phase(per_request, per_request * batch, accept, ttft)


def landscape(spec: StudySpec) -> MeasuredLandscape:
    return model_landscape(spec, model, noise=0.025)
