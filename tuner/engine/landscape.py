"""A ``Measurer`` that answers from the simulator's noiseless ground truth, with optional seeded noise.

bench/sample_efficiency.py runs whole studies through it in seconds (the same ``TrialRunner`` a real study uses),
and knows the true optimum of the space, so it can say how close a sampler gets in N trials.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from objectives.scoring import Scorer, references_from
from objectives.spec import BenchmarkSpec
from tuner.sglang.launch import ServerConfig
from tuner.sglang.options import OptionTable
from tuner.simulator.config import InvalidServerArgs
from tuner.simulator.ground_truth import expected_metrics
from tuner.simulator.profile import Profile
from tuner.study.space import SearchSpace
from tuner.targets.base import DeployFailed

_FAILURE_CLASS = {"flags": "invalid-flags", "config": "invalid-flags", "oom": "out-of-memory",
                  "runtime": "crashed"}


def true_phase_metrics(profile: Profile, argv: list[str], benchmark: BenchmarkSpec) -> dict[int, dict[str, Any]]:
    """Expected per-phase metrics; raises ``InvalidServerArgs`` for a configuration that cannot run."""
    out: dict[int, dict[str, Any]] = {}
    for phase in benchmark.phases:
        m = expected_metrics(profile, argv, benchmark.workload, phase.concurrency)
        out[phase.concurrency] = {
            "per_request_tok_s_mean": m.per_request_tok_s, "aggregate_tok_s": m.aggregate_tok_s,
            "accept_length": m.accept_length, "ttft_p99_ms": m.ttft_s * 1000, "ttft_mean_ms": m.ttft_s * 1000,
            "e2e_mean_ms": m.e2e_s * 1000, "error_rate": 0.0,
        }
    return out


class OracleMeasurer:
    def __init__(self, profile: Profile, table: OptionTable, benchmark: BenchmarkSpec, *,
                 noise: float = 0.0, seed: int = 0) -> None:
        self.profile = profile
        self.table = table
        self.benchmark = benchmark
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self._metrics: dict[int, dict[str, Any]] = {}
        self.deploys = 0

    def deploy(self, config: ServerConfig) -> Mapping[str, Any]:
        self.deploys += 1
        try:
            self._metrics = true_phase_metrics(self.profile, config.argv(self.table), self.benchmark)
        except InvalidServerArgs as exc:
            raise DeployFailed(_FAILURE_CLASS.get(exc.kind, "other"), str(exc)) from None  # type: ignore[arg-type]
        return {"launch": " ".join(config.argv(self.table)), "timings": {"deploy_s": 0.0, "ready_s": 0.0}}

    def measure(self, phase_index: int) -> Mapping[str, Any]:
        concurrency = self.benchmark.phases[phase_index].concurrency
        metrics = dict(self._metrics[concurrency])
        if self.noise:
            for key in ("per_request_tok_s_mean", "aggregate_tok_s"):
                metrics[key] *= float(1.0 + self.rng.normal(0.0, self.noise))
        return metrics


def true_scores(space: SearchSpace, profile: Profile, table: OptionTable) -> dict[str, float]:
    """Ground-truth score of every distinct valid configuration of ``space`` (infeasible ones left out),
    normalised by the baseline's ground truth exactly as a study normalises by its measured baseline."""
    spec = space.spec
    baseline = space.decode(space.encode(spec.baseline)).config if spec.baseline else None
    metrics_by_key: dict[str, dict[int, dict[str, Any]]] = {}
    for params in space.points():
        config = space.decode(params).config
        if config is None or config.key() in metrics_by_key:
            continue
        try:
            metrics_by_key[config.key()] = true_phase_metrics(profile, config.argv(table), spec.benchmark)
        except InvalidServerArgs:
            metrics_by_key[config.key()] = {}
    reference_metrics = metrics_by_key.get(baseline.key()) if baseline is not None else None
    refs = references_from(reference_metrics or {}, spec.objective.weights) or {}
    scorer = Scorer(spec.objective.weights, refs)
    scores = {}
    for key, metrics in metrics_by_key.items():
        score = scorer.score(metrics) if metrics else None
        if score is not None:
            scores[key] = score
    return scores
