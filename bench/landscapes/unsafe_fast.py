"""Held-out-style landscape: memory-tight's physics, but its fastest region is unsafe once the
server is up.

What speculative-decoding servers do in the field (sgl-project/sglang#16027, #13352, #21475): wide
trees (topk ≥ 2) with deep drafts (steps ≥ 4) emit different text at temperature 0 — the fastest
configurations of this landscape; and a C=64 decode batch whose activation memory (batch × draft
tokens) does not fit beside the graphs left by the memory fraction dies with
``torch.OutOfMemoryError`` long after the server reported ready. Both are run failures
(tuner/run/trial.py): the search must learn to avoid them, never pick one.
"""

from __future__ import annotations

from bench.landscapes import memory_tight
from bench.landscapes._base import Phase, Point, RunFailure, model_landscape
from tuner.evaluation.landscape import MeasuredLandscape
from tuner.study.spec import StudySpec


def unsafe(p: Point, concurrency: int) -> str | None:
    """The run failure ``p`` meets at ``concurrency``, or None."""
    if p.topk >= 2 and p.steps >= 4:
        return "wrong-output"
    free = max(0.0, 0.97 - p.mem) * 80.0  # GB outside the static pool
    if concurrency > 1 and min(concurrency, p.running) * p.draft * 0.012 > free:
        return "decode-oom"
    return None


def model(p: Point, concurrency: int) -> Phase:
    # start-up failures first, as memory_tight decides them
    phase = memory_tight.model(p, concurrency)
    failure = unsafe(p, concurrency)
    if failure == "wrong-output":
        raise RunFailure("wrong-output", "wrong-output",
                         "text departs from the baseline's at temperature 0")
    if failure == "decode-oom":
        raise RunFailure("crashed-under-load", "decode-oom",
                         "torch.OutOfMemoryError: CUDA out of memory at C=64")
    return phase


def landscape(spec: StudySpec) -> MeasuredLandscape:
    return model_landscape(spec, model)
