"""A landscape over the kind of speculation (its own physics, not the simulator's): a static draft
tree, SGLang's adaptive steps, n-gram lookup, or none — for a space with branches
(tuner/study/branches.py).

Physics: a decode iteration costs a fixed part plus a per-token part that grows with the batch and
the tokens verified; acceptance is a geometric chain (rate 0.72 per position for the draft head, a
top-k tree adds tries); C=1 wants a deep tree, C=64 a short one. SGLang's adaptive steps settle on
the chain length nearest its accept length at C=1 (3 % below the best static chain: switches and EMA
lag) and turn speculation off at C=64 (its batch-64 tier). N-gram acceptance is low on chat (rate
0.25 at the first position, breadth adds a little) and its verify of many tokens hurts at C=64.
Memory: a static fraction above 0.88 with a tree of more than 24 draft tokens runs out of memory
during graph capture. The optimum is a static tree; the adaptive branch is within a few per cent at
C=1 and the off branch is best at C=64 alone — so no branch but the static one reaches 0.98.
``landscape_repetitive``: the same with n-gram acceptance 0.9 (a repetitive workload), where NGRAM
wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from bench.landscapes._base import Phase
from tuner.evaluation.landscape import DeployFailed, MeasuredLandscape, ServerConfig
from tuner.study.spec import StudySpec


def _chain(rate: float, depth: float, tries: float = 1.0) -> float:
    p = 1.0 - (1.0 - rate) ** tries
    return float(sum(p ** (i + 1) for i in range(round(depth)))) + 1.0


def _iteration_ms(batch: int, verified: float, steps: float) -> float:
    return 9.0 + 0.9 * steps + 0.045 * batch * verified


def model(config: ServerConfig, concurrency: int, ngram_rate: float = 0.25) -> Phase:
    algorithm = config.get("--speculative-algorithm")
    mem = float(config.get("--mem-fraction-static", 0.85))
    batch = 1 if concurrency == 1 else min(concurrency,
                                           int(config.get("--max-running-requests", 48)))
    if algorithm is None:
        accept, t = 1.0, _iteration_ms(batch, 1.0, 0.0)
    elif config.get("--speculative-adaptive"):
        if concurrency == 1:
            best = max((1, 3, 5, 7), key=lambda s: _chain(0.72, s) / _iteration_ms(1, s + 1, s))
            accept, t = _chain(0.72, best), _iteration_ms(1, best + 1, best) * 1.03
        else:
            accept, t = 1.0, _iteration_ms(batch, 1.0, 0.0) * 1.02
    elif str(algorithm).upper() == "NGRAM":
        breadth = int(config.get("--speculative-ngram-max-bfs-breadth", 10))
        draft = int(config.get("--speculative-num-draft-tokens", 12))
        accept = _chain(ngram_rate, max(1.0, (draft - 1) / max(breadth, 1)),
                        1.0 + 0.3 * (breadth - 1) ** 0.5)
        t = _iteration_ms(batch, draft, 0.0) + 0.02 * batch
    else:
        steps = int(config.get("--speculative-num-steps", 3))
        topk = int(config.get("--speculative-eagle-topk", 1))
        draft = int(config.get("--speculative-num-draft-tokens", steps + 1))
        if mem > 0.88 and draft > 24:
            raise DeployFailed("out-of-memory", "CUDA graph capture out of memory")
        depth = min(float(steps), (draft - 1) / max(1.0, 0.5 * topk))
        accept = _chain(0.72, depth, topk ** 0.5)
        t = _iteration_ms(batch, draft, steps)
    per_request = 1000.0 * accept / t * (1.0 + 0.4 * (mem - 0.85))
    return Phase(per_request, per_request * batch, accept, 300.0 + 20.0 * batch)


class KindsMeasurer:
    def __init__(self, benchmark: Any, *, noise: float = 0.0, seed: int = 0,
                 ngram_rate: float = 0.25) -> None:
        self.benchmark = benchmark
        self.ngram_rate = ngram_rate
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.config: ServerConfig | None = None

    def deploy(self, config: ServerConfig) -> Mapping[str, Any]:
        # raises DeployFailed for a start that fails
        model(config, self.benchmark.phases[0].concurrency, self.ngram_rate)
        self.config = config
        return {"timings": {"deploy_s": 0.0, "ready_s": 0.0}}

    def measure(self, phase_index: int) -> Mapping[str, Any]:
        assert self.config is not None
        phase = model(self.config, self.benchmark.phases[phase_index].concurrency, self.ngram_rate)
        jitter = [float(1.0 + self.rng.normal(0.0, self.noise)) if self.noise else 1.0
                  for _ in range(2)]
        return {"per_request_tok_s_mean": phase.per_request_tok_s * jitter[0],
                "aggregate_tok_s": phase.aggregate_tok_s * jitter[1],
                "accept_length": phase.accept_length,
                "ttft_p99_ms": phase.ttft_p99_ms, "ttft_mean_ms": phase.ttft_p99_ms / 2,
                "e2e_mean_ms": 256_000.0 / max(phase.per_request_tok_s, 1e-9), "error_rate": 0.0}


def landscape(spec: StudySpec) -> MeasuredLandscape:
    return MeasuredLandscape(spec,
                             lambda seed: KindsMeasurer(spec.benchmark, noise=0.02, seed=seed),
                             truth=KindsMeasurer(spec.benchmark), version="chat-1")


def landscape_repetitive(spec: StudySpec) -> MeasuredLandscape:
    """The same physics on a repetitive, retrieval-heavy workload: n-gram drafts are accepted at 0.9
    per position, so the optimum is on the NGRAM branch and the baseline's EAGLE3 branch is the
    dominated one."""
    return MeasuredLandscape(spec, lambda seed: KindsMeasurer(spec.benchmark, noise=0.02, seed=seed,
                                                              ngram_rate=0.9),
                             truth=KindsMeasurer(spec.benchmark, ngram_rate=0.9),
                             version="repetitive-1")
