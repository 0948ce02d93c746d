"""What a benchmark produces: one frozen ``PhaseResult`` per phase, gathered in a
``BenchmarkResult``.

Metric fields are flat and named as study-file constraints name them (``ttft_p99_ms``,
``error_rate``, ``c64.aggregate_tok_s`` ...), so a trial can store ``to_dict()`` as is and re-rank
later without re-running. Latencies are in milliseconds, as bench_serving prints them. The
per-request records travel with the result for whoever wants them but stay out of ``to_dict()``
unless asked for.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from objectives.accept_length import AcceptLength
from objectives.confidence import MeanSample, RatioSample, sample_from_dict
from objectives.latency_intervals import LATENCY_INTERVALS
from objectives.paired import PerRequest
from objectives.records import RequestRecord
from objectives.spec import METRICS, BenchmarkSpec, PhaseSpec

StopReason = Literal["requests", "duration", "ci", "deadline", "failures"]

__all__ = ["METRICS", "BenchmarkResult", "PhaseResult", "StopReason"]

#: The metrics that carry a 95 % interval, stored as ``<metric>_ci = [low, high]``.
INTERVALS = ("per_request_tok_s_mean_ci", "aggregate_tok_s_ci")


def scaled_sample(stored: dict[str, Any], scale: float) -> dict[str, Any]:
    """A stored sample as a server ``scale`` times slower would have produced it (see
    ``at_time_scale``)."""
    sample = sample_from_dict(stored)
    if isinstance(sample, MeanSample):
        return sample.scaled(1 / scale).to_dict()  # speeds
    if isinstance(sample, RatioSample):
        return sample.scaled(scale).to_dict()  # durations
    return stored


@dataclass(frozen=True)
class PhaseResult:
    spec: PhaseSpec
    stopped_by: StopReason
    duration_s: float  # the measured window
    completed: int  # successful measured requests
    failed: int
    cancelled: int  # still running when the phase stopped normally; their in-window tokens count
    errors: dict[str, int]
    output_tokens: int  # tokens that arrived inside the window
    tokens_exact: bool  # False when some server sent only totals (see objectives.usage)
    ci_half_width: float | None  # relative 95 % half-width of aggregate_tok_s (batch means)
    warmup_failed: int
    accept_length_source: str

    per_request_tok_s_mean: float | None
    per_request_tok_s_median: float | None
    aggregate_tok_s: float | None
    request_rate: float | None
    accept_length: float | None
    tokens_per_chunk: float | None
    achieved_concurrency: float | None
    error_rate: float | None
    ttft_mean_ms: float | None
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    ttft_p99_ms: float | None
    itl_mean_ms: float | None
    itl_p50_ms: float | None
    itl_p90_ms: float | None
    itl_p99_ms: float | None
    tpot_mean_ms: float | None
    tpot_p50_ms: float | None
    tpot_p90_ms: float | None
    tpot_p99_ms: float | None
    e2e_mean_ms: float | None
    e2e_p50_ms: float | None
    e2e_p90_ms: float | None
    e2e_p99_ms: float | None

    # 95 % intervals of the two throughput figures, from the request-level data
    # (objectives/confidence.py), and the sufficient statistics they come from, by metric name (what
    # pools repeated phases of a configuration).
    per_request_tok_s_mean_ci: tuple[float, float] | None = None
    aggregate_tok_s_ci: tuple[float, float] | None = None
    # 95 % intervals of the latency figures shown beside the throughput (a bootstrap over the
    # requests: objectives/latency_intervals.py), in ms.
    ttft_p50_ms_ci: tuple[float, float] | None = None
    ttft_p99_ms_ci: tuple[float, float] | None = None
    itl_mean_ms_ci: tuple[float, float] | None = None
    samples: dict[str, dict[str, Any]] = field(default_factory=dict)
    # "server": the figures are on the server's own schedule (a simulator stamps its events; see
    # objectives.metrics.on_server_schedule), and client_aggregate_tok_s is what arrival times said.
    timebase: Literal["client", "server"] = "client"
    client_aggregate_tok_s: float | None = None
    # A phase failure (objectives.overload): its figures are kept for inspection but are not a
    # measurement.
    failure: str | None = None  # "simulator-overloaded"
    failure_message: str | None = None
    # schedule given up / busy time over the measured part
    simulator_dropped_share: float | None = None
    # The primary metric's parts per request index (objectives/paired.py): what pairs this phase
    # with the reference run's same requests for the score's interval.
    per_request: dict[str, Any] | None = None

    records: tuple[RequestRecord, ...] = field(default=(), repr=False, compare=False)

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def accept(self) -> AcceptLength:
        return AcceptLength(self.accept_length, self.accept_length_source)  # type: ignore[arg-type]

    def at_time_scale(self, scale: float) -> PhaseResult:
        """The same phase as a server ``scale`` times slower would have measured it (the simulator's
        ``--time-scale``): rates divided, durations multiplied, counts and ratios unchanged."""
        if scale == 1.0:
            return self
        changes: dict[str, Any] = {"duration_s": self.duration_s * scale}
        for name in METRICS:
            value = getattr(self, name)
            if value is None:
                continue
            if name.endswith("_ms"):
                changes[name] = value * scale
            elif name.endswith("_tok_s") or "_tok_s_" in name or name == "request_rate":
                changes[name] = value / scale
        for name in INTERVALS:
            interval = getattr(self, name)
            if interval is not None:
                changes[name] = (interval[0] / scale, interval[1] / scale)
        for name in LATENCY_INTERVALS:
            interval = getattr(self, f"{name}_ci")
            if interval is not None:
                changes[f"{name}_ci"] = (interval[0] * scale, interval[1] * scale)
        if self.client_aggregate_tok_s is not None:
            changes["client_aggregate_tok_s"] = self.client_aggregate_tok_s / scale
        changes["samples"] = {name: scaled_sample(stored, scale) for name,
                              stored in self.samples.items()}
        parts = PerRequest.from_dict(self.per_request)
        if parts is not None:
            changes["per_request"] = parts.scaled(scale).to_dict()
        return dataclasses.replace(self, **changes)

    def metric(self, name: str) -> float | None:
        """A metric by the name study files use; ``KeyError`` for an unknown name."""
        if name not in METRICS:
            raise KeyError(name)
        value: float | None = getattr(self, name)
        return value

    def to_dict(self, records: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"phase": self.label}
        for f in dataclasses.fields(self):
            if f.name == "records":
                continue
            value = getattr(self, f.name)
            out[f.name] = dataclasses.asdict(value) if f.name == "spec" else value
        if records:
            out["records"] = [_record_dict(r) for r in self.records]
        return out


@dataclass(frozen=True)
class BenchmarkResult:
    base_url: str
    spec: BenchmarkSpec
    model: str | None
    phases: tuple[PhaseResult, ...]
    # what a simulator said its time scale is (None: the server did not say); figures are as
    # measured
    time_scale: float | None = None

    @property
    def scaled(self) -> bool:
        """The figures come from a simulator running faster or slower than the real server would."""
        return self.time_scale is not None and self.time_scale != 1.0

    def phase(self, concurrency: int) -> PhaseResult:
        for p in self.phases:
            if p.spec.concurrency == concurrency:
                return p
        raise KeyError(f"no phase with concurrency {concurrency}")

    def to_dict(self, records: bool = False) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "model": self.model,
            "time_scale": self.time_scale,
            "scaled": self.scaled,
            "workload": dataclasses.asdict(self.spec.workload),
            "phases": [p.to_dict(records) for p in self.phases],
        }


def _record_dict(record: RequestRecord) -> dict[str, Any]:
    out = dataclasses.asdict(record)
    out["error_kind"] = None if record.error_kind is None else str(record.error_kind)
    out["chunk_times_s"] = list(record.chunk_times_s)
    out["chunk_tokens"] = list(record.chunk_tokens)
    return out
