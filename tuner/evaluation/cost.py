"""What a study's trials cost in GPU time: (start-up + benchmark) × the GPUs the server holds.

A measured trial holds its GPUs from the deploy until the benchmark's last phase ends:

* **start-up** = the trial's stored ``deploy_s + ready_s`` (a failed start: the time until it
  failed, which a ``DeployFailed`` may carry as its own ``timings``). A trial without a modelled or
  measured readiness (``ready_s`` missing or 0, as a performance model that says nothing about
  start-up stores) is given ``default_startup(config, failed)`` instead; ``wait_s`` replaces every
  start-up by a fixed wait (a person who restarts, then sleeps a fixed time before benchmarking);
* **benchmark** = per phase of ``benchmark`` that ran, (warmup + requests) × ``max_tokens`` at the
  speed the trial measured there: C=1 runs its requests one after another at the per-request speed,
  a phase of C > 1 at its aggregate throughput; capped by the phase's ``duration`` and ``deadline``
  as a real phase is. A phase the trial skipped (it could not beat the best) costs nothing; a failed
  start runs no benchmark. A phase of another benchmark than the one measured
  (``CostModel.benchmark`` need not be the study's: the seed campaign's had five concurrency levels)
  is costed at ``min(C × C=1 speed, the highest measured aggregate)`` — a saturating throughput
  curve that is never slower than the real one, so that benchmark's time is a lower bound;
* **GPUs** = tensor × pipeline × data parallel size of the configuration (data parallel inside the
  tensor group with ``--enable-dp-attention``).

Duplicates and rejected proposals deploy nothing and cost nothing: only ``measured`` records are
passed in. Output tokens are taken at ``max_tokens``: requests that stop at EOS make a real
benchmark shorter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

from objectives.scoring import PhaseMetrics, figure, primary_metric
from objectives.spec import BenchmarkSpec, PhaseSpec
from tuner.sglang.launch import ServerConfig
from tuner.simulator.profile import load_profile
from tuner.simulator.startup import startup_s
from tuner.store.record import Outcome, TrialRecord
from tuner.study.spec import StudySpec
from tuner.targets.simulated import simulator_profile

#: (configuration, whether its start failed) → seconds of start-up, for a trial that stored none.
StartupModel = Callable[[ServerConfig, bool], float]

_SIZE_FLAGS = {"tp": ("--tp-size", "--tensor-parallel-size"),
               "pp": ("--pp-size", "--pipeline-parallel-size"),
               "dp": ("--dp-size", "--data-parallel-size")}


@dataclass(frozen=True)
class TrialCost:
    """One measured trial's hold on the GPUs."""

    number: int
    startup_s: float
    benchmark_s: float
    gpus: int

    @property
    def seconds(self) -> float:
        return self.startup_s + self.benchmark_s

    @property
    def gpu_hours(self) -> float:
        return self.seconds * self.gpus / 3600.0


@dataclass(frozen=True)
class CostModel:
    """How the trials of one study are costed (module docstring)."""

    benchmark: BenchmarkSpec  # the benchmark each trial runs: the study's, or another method's
    wait_s: float | None = None  # a fixed wait per (re)start instead of the trial's own start-up
    default_startup: StartupModel | None = None  # for trials without a stored readiness

    def trial(self, record: TrialRecord) -> TrialCost:
        failed = record.outcome is Outcome.DEPLOY_FAILED
        config = record.config if record.config is not None else ServerConfig.build({})
        return TrialCost(record.number, self._startup_s(record, config, failed),
                         0.0 if failed
                         else benchmark_s(self.benchmark, record.metrics, record.skipped_phases),
                         gpus_of(config))

    def cumulative_gpu_hours(self, records: Iterable[TrialRecord]) -> list[float]:
        """GPU-hours spent up to and including each record, in the order given (the order
        measured)."""
        return list(accumulate(self.trial(r).gpu_hours for r in records))

    def _startup_s(self, record: TrialRecord, config: ServerConfig, failed: bool) -> float:
        if self.wait_s is not None:
            return self.wait_s
        ready = float(record.timings.get("ready_s") or 0.0)
        if ready <= 0 and self.default_startup is not None:
            return self.default_startup(config, failed)
        return float(record.timings.get("deploy_s") or 0.0) + ready


def gpus_of(config: ServerConfig) -> int:
    """GPUs one server of ``config`` holds: tp × pp × dp (dp shares the tp group with
    ``--enable-dp-attention``)."""
    size = {name: _int_flag(config, spellings) for name, spellings in _SIZE_FLAGS.items()}
    dp = 1 if config.get("--enable-dp-attention") else size["dp"]
    return size["tp"] * size["pp"] * dp


def benchmark_s(benchmark: BenchmarkSpec, metrics: PhaseMetrics,
                skipped: Sequence[int] = ()) -> float:
    """Seconds ``benchmark`` runs on a server that measured ``metrics`` (per concurrency); phases in
    ``skipped`` and phases without any speed to go by cost nothing."""
    total = 0.0
    for phase in benchmark.phases:
        if phase.concurrency in skipped:
            continue
        rate = _rate(phase.concurrency, metrics)
        if rate:
            total += phase_seconds(phase, benchmark.workload.max_tokens, rate)[0]
    return total


def study_startup(spec: StudySpec) -> StartupModel:
    """The default start-up: the simulator's start-up model (tuner/simulator/startup.py) of the
    study's ``[target] profile`` (the default profile for a target that names none), for the
    configuration's command line. A configuration the model starts but the trial's own landscape
    failed costs the model's full time to ready (a failure late in start-up, as the usual CUDA-graph
    capture out-of-memory is)."""
    chosen = simulator_profile(spec.target.settings)
    profile = load_profile(chosen) if chosen else load_profile()
    table = spec.option_table

    def model(config: ServerConfig, failed: bool) -> float:
        return startup_s(profile, config.argv(table))

    return model


def _rate(concurrency: int, metrics: PhaseMetrics) -> float | None:
    """Tokens per second the whole phase produces: measured where the phase was, else the saturating
    estimate."""
    measured = _positive(figure(metrics.get(concurrency), primary_metric(concurrency)))
    if measured is not None:
        return measured
    single = _positive(figure(metrics.get(1), "per_request_tok_s_mean"))
    aggregates = [rate for c, m in sorted(metrics.items())
                  if c > 1 and (rate := _positive(figure(m, "aggregate_tok_s"))) is not None]
    if single is None:
        return aggregates[-1] if aggregates else None
    unbounded = concurrency * single
    return min(unbounded, aggregates[-1]) if aggregates else unbounded


#: What bounds a phase's time (``phase_seconds``): its request count, its duration, its duration
#: after the warmup requests (a duration-only phase), or its deadline.
PhaseBound = Literal["requests", "duration", "duration+warmup", "deadline"]


def phase_seconds(phase: PhaseSpec, max_tokens: int, rate: float) -> tuple[float, PhaseBound]:
    """How long ``phase`` runs when the server produces ``rate`` tokens per second in it (every
    request at ``max_tokens``), and what bounds that time."""
    seconds: float
    bound: PhaseBound
    if phase.requests is not None:
        seconds, bound = (phase.warmup + phase.requests) * max_tokens / rate, "requests"
        if phase.duration_s is not None and phase.duration_s < seconds:
            seconds, bound = phase.duration_s, "duration"
    else:
        # a phase has requests or a duration (PhaseSection.to_spec)
        assert phase.duration_s is not None
        seconds, bound = phase.duration_s + phase.warmup * max_tokens / rate, "duration+warmup"
    if seconds > phase.deadline_s:
        seconds, bound = phase.deadline_s, "deadline"
    return seconds, bound


def _int_flag(config: ServerConfig, spellings: tuple[str, ...]) -> int:
    for name in spellings:
        value = config.get(name)
        if value is not None and not isinstance(value, bool):
            return max(1, int(value))
    return 1


def _positive(value: float | None) -> float | None:
    """``value`` where it is a positive rate to go by, else None."""
    return value if value is not None and value > 0 else None
