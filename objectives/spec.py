"""What to measure, as plain frozen values: the workload and the concurrency phases of a benchmark.

The study file's ``[benchmark]`` section is validated into these (``tuner.study.models``);
``spectune bench`` builds them from its options. The load generator only ever sees these values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Api = Literal["chat", "completions", "generate"]

#: The metric names a phase reports (``objectives.results.PhaseResult`` has one field each), in the
#: order the results table shows them; study-file constraints name the same. Here rather than in
#: results.py so reading a study file does not import the load generator's HTTP stack.
METRICS = (
    "per_request_tok_s_mean", "per_request_tok_s_median", "aggregate_tok_s", "request_rate",
    "accept_length", "tokens_per_chunk", "achieved_concurrency", "error_rate",
    *(f"{m}_{s}_ms" for m in ("ttft", "itl", "tpot", "e2e") for s in ("mean", "p50", "p90", "p99")),
)

#: Realistic by default: sampling at temperature 0.7 and stopping at EOS. The seed's campaign used
#: temperature 0 with ignore_eos, which makes the draft model look better than it is in production
#: (greedy text is easier to predict, and text generated past EOS is repetitive). ``preset =
#: "seed"`` in a study file reproduces that setup on purpose.
DEFAULT_TEMPERATURE = 0.7
DEFAULT_IGNORE_EOS = False
DEFAULT_MAX_TOKENS = 512


@dataclass(frozen=True)
class WorkloadSpec:
    """The requests one phase sends.

    ``dataset`` is ``"builtin"`` (the realistic prompt set shipped with spectune), ``"synthetic"``
    (prompts of ``input_tokens`` tokens) or the path of a JSONL prompt file (ShareGPT-style
    conversations or plain prompts).
    """

    api: Api = "chat"
    dataset: str = "builtin"
    input_tokens: int = 256
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = DEFAULT_TEMPERATURE
    ignore_eos: bool = DEFAULT_IGNORE_EOS
    model: str | None = None  # None: ask the server's /v1/models
    seed: int = 0
    request_timeout_s: float = 300.0
    connect_timeout_s: float = 10.0
    # Longest silence inside one streaming response before the request counts as stalled: long
    # enough for a request queued behind a full batch to get its first token, far shorter than the
    # request timeout.
    stall_timeout_s: float = 60.0


@dataclass(frozen=True)
class PhaseSpec:
    """One closed-loop phase: ``concurrency`` requests in flight at all times.

    Ends after ``requests`` measured requests, or after ``duration_s`` seconds, whichever is set
    (both: the first reached). ``ci_target`` (e.g. 0.02) stops early once the throughput's
    confidence interval is within ±2 %. ``deadline_s`` bounds the whole phase however the server
    behaves.
    """

    concurrency: int
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = 1
    ci_target: float | None = None
    deadline_s: float = 1800.0

    @property
    def label(self) -> str:
        return f"C={self.concurrency}"


def default_phases() -> tuple[PhaseSpec, ...]:
    """C=1 per-request speed, then C=64 aggregate throughput: the two numbers a tuning decision
    needs."""
    return (
        PhaseSpec(concurrency=1, requests=8, warmup=1),
        PhaseSpec(concurrency=64, requests=256, warmup=8),
    )


@dataclass(frozen=True)
class BenchmarkSpec:
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    phases: tuple[PhaseSpec, ...] = field(default_factory=default_phases)


@dataclass(frozen=True)
class ConstraintSpec:
    """``metric op bound`` on one phase (``phase=None``: every phase that reports the metric)."""

    text: str
    metric: str
    op: Literal["<", "<=", ">", ">="]
    bound: float
    phase: int | None = None
