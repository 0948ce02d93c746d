"""What the landscapes of bench/landscapes/ share: reading a configuration, seeded noise, the metric
dict.

Each landscape module supplies one ``model(tree)`` function with its own physics; this module turns
it into a ``Measurer`` (tuner/evaluation/landscape.py) and a ``MeasuredLandscape`` factory for
bench/sample_efficiency.py (``--landscape bench/landscapes/memory_tight.py:landscape``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from objectives.spec import BenchmarkSpec
from tuner.evaluation.landscape import (
    DeployFailed,
    FailureCause,
    MeasuredLandscape,
    RunFailed,
    ServerConfig,
)
from tuner.study.spec import StudySpec


@dataclass(frozen=True)
class Point:
    """The flags every landscape reads (the seed space's six tuned flags)."""

    steps: int
    topk: int
    draft: int
    mem: float
    graph: int
    running: int

    @classmethod
    def of(cls, config: ServerConfig) -> Point:
        return cls(int(config.get("--speculative-num-steps", 1)),
                   int(config.get("--speculative-eagle-topk", 1)),
                   int(config.get("--speculative-num-draft-tokens", 2)),
                   float(config.get("--mem-fraction-static", 0.85)),
                   int(config.get("--cuda-graph-max-bs-decode", 64)),
                   int(config.get("--max-running-requests", 64)))


@dataclass(frozen=True)
class Phase:
    """What one benchmark phase reports: per-request decode speed, box throughput, TTFT p99,
    errors."""

    per_request_tok_s: float
    aggregate_tok_s: float
    accept_length: float
    ttft_p99_ms: float
    error_rate: float = 0.0


class Failure(Exception):
    """Raised by a model for a configuration that does not start (``kind``: DeployFailed's failure
    class)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class RunFailure(Exception):
    """Raised by a model for a configuration that starts but fails while measured: ``kind`` is a
    run-failure class (crashed-under-load, hung, wrong-output), ``cause`` its typed cause (e.g.
    decode-oom)."""

    def __init__(self, kind: str, cause: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.cause = cause


Model = Callable[[Point, int], Phase]  # (point, concurrency) → phase; raises Failure or RunFailure


class ModelMeasurer:
    """A ``Measurer`` answering from ``model`` with seeded relative Gaussian noise on the two
    throughputs."""

    def __init__(self, model: Model, benchmark: BenchmarkSpec, *, noise: float = 0.0,
                 seed: int = 0) -> None:
        self.model = model
        self.benchmark = benchmark
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self._point: Point | None = None

    def deploy(self, config: ServerConfig) -> Mapping[str, Any]:
        point = Point.of(config)
        # a model decides start-up failures from the configuration alone, so probe one phase here
        try:
            self.model(point, self.benchmark.phases[0].concurrency)
        except Failure as exc:
            raise DeployFailed(exc.kind, str(exc)) from None  # type: ignore[arg-type]
        except RunFailure:
            pass  # it starts; the failure shows while measured
        self._point = point
        return {"timings": {"deploy_s": 0.0, "ready_s": 0.0}}

    def measure(self, phase_index: int) -> Mapping[str, Any]:
        assert self._point is not None
        concurrency = self.benchmark.phases[phase_index].concurrency
        try:
            phase = self.model(self._point, concurrency)
        except RunFailure as exc:  # how a Measurer reports a run failure (docs/benchmarks.md)
            raise RunFailed(exc.kind, str(exc),  # type: ignore[arg-type]
                            cause=FailureCause(exc.cause)) from None
        per_request, aggregate = phase.per_request_tok_s, phase.aggregate_tok_s
        if self.noise:
            per_request *= float(1.0 + self.rng.normal(0.0, self.noise))
            aggregate *= float(1.0 + self.rng.normal(0.0, self.noise))
        return {"per_request_tok_s_mean": per_request, "aggregate_tok_s": aggregate,
                "accept_length": phase.accept_length, "ttft_p99_ms": phase.ttft_p99_ms,
                "ttft_mean_ms": phase.ttft_p99_ms / 2,
                "e2e_mean_ms": 512 * 1000 / max(per_request, 1e-9), "error_rate": phase.error_rate}


def model_landscape(spec: StudySpec, model: Model, noise: float = 0.02) -> MeasuredLandscape:
    return MeasuredLandscape(spec, lambda seed: ModelMeasurer(model, spec.benchmark, noise=noise,
                                                              seed=seed),
                             truth=ModelMeasurer(model, spec.benchmark))
