"""``spectune validate --plan``: what the study's first deploy would write or run, and how long the
study takes.

The deploy text comes from the target itself (``Target.plan``: the same launch command and drop-in
renderer a deploy uses), for the configuration tune deploys first — the baseline, else the first
valid point. Nothing is contacted: building a target opens no connection. ``--check-target`` then
contacts it as a study's first step would (``Target.check_access``: SSH login and ``systemctl``, or
the command and the port), with timeouts.

The duration is an estimate from the study's settings, and says what it assumed: deploy + readiness
from the study's own measured trials when it has some, else the simulator's startup model, else
``startup_timeout`` (the most one may take: then an upper bound, and said so); each phase from its
request count and ``max_tokens`` at the simulator's modelled rate for the configuration, else at the
seed campaign's baseline rates — labelled as assumed, since they are another model's — or from
measured trials. A real server that stops at EOS is faster.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from objectives.spec import PhaseSpec
from tuner.app.preflight import COUNT_LIMIT, count_by_sglang, run_preflight
from tuner.app.validate import ValidationReport
from tuner.core.defaults import DEFAULT_REPEATS, DEFAULT_TOP
from tuner.evaluation.cost import phase_seconds
from tuner.store.record import TrialRecord
from tuner.study.hosts import spec_for_host
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec
from tuner.study.target import make_target
from tuner.targets.base import DeployPlan

#: The seed campaign's baseline server (Qwen3.5-122B + EAGLE-3 on 4 GPUs): 120 tok/s per request at
#: C=1, 830 tok/s together at C=64. Only the order of magnitude matters for a plan; measured trials
#: replace it.
ASSUMED_C1_TOK_S = 120.0
ASSUMED_AGGREGATE_TOK_S = 830.0


@dataclass(frozen=True)
class PhaseEstimate:
    label: str
    seconds: float
    basis: str


@dataclass(frozen=True)
class StudyPlan:
    deploy: DeployPlan
    startup_s: float
    startup_basis: str
    phases: tuple[PhaseEstimate, ...]
    n_trials: int
    #: Deploys of the confirmation stage after the trials (top K and the baseline, R restarts each).
    confirm_runs: int
    timeout_s: float | None
    #: Median seconds of a measured trial, when the study has measured some (then it wins over the
    #: phases).
    measured_trial_s: float | None = None
    measured_count: int = 0
    #: ``[target] hosts``: that many workers run trials at once (docs/scaling.md).
    hosts: int = 1

    @property
    def trial_s(self) -> float:
        if self.measured_trial_s is not None:
            return self.measured_trial_s
        return self.startup_s + sum(p.seconds for p in self.phases)

    @property
    def trials_s(self) -> float:
        """The trials' wall time: one worker per host runs them side by side."""
        return math.ceil(self.n_trials / self.hosts) * self.trial_s

    @property
    def confirm_s(self) -> float:
        return self.confirm_runs * self.trial_s

    def fitting_trials(self) -> int | None:
        """How many trials the timeout leaves room for (None: no timeout)."""
        if self.timeout_s is None:
            return None
        if self.trial_s <= 0:
            return self.n_trials
        return min(self.n_trials, math.floor(self.timeout_s / self.trial_s) * self.hosts)


def plan_study(report: ValidationReport, *, confirm: int = DEFAULT_TOP,
               repeats: int = DEFAULT_REPEATS) -> StudyPlan:
    """The plan of ``report``'s study (``validate_study``); contacts nothing."""
    spec = report.spec
    target = make_target(spec)
    try:
        deploy = target.plan(report.config)
        expected = target.expected_startup_s(report.config)
        scale = target.time_scale
        rates = {p.concurrency: target.expected_rate(report.config, spec.benchmark.workload,
                                                     p.concurrency)
                 for p in spec.benchmark.phases}
    finally:
        target.close()
    if expected is not None:
        startup_s, basis = expected, "the simulator's startup model for this configuration"
    else:
        startup_s = spec.target.startup_timeout_s
        basis = ("at most: startup_timeout, since how long this server takes to start is unknown "
                 "before its first deploy; the totals are upper bounds")
    phases = tuple(_phase(p, spec, scale, rates.get(p.concurrency)) for p in spec.benchmark.phases)
    measured = _measured_trial_s(report.measured)
    confirm_runs = (min(confirm, spec.study.n_trials) + 1) * repeats if confirm else 0
    return StudyPlan(deploy, startup_s, basis, phases, spec.study.n_trials, confirm_runs,
                     spec.study.timeout_s,
                     measured, len(report.measured), max(1, len(spec.target.hosts)))


def check_target(spec: StudySpec) -> tuple[str, ...]:
    """Contact the study's target — every host of ``[target] hosts`` — as a study first would (SSH
    login and systemctl, or the command and port), then run the preflight ``tune`` runs
    (tuner/app/preflight.py: the server's options, its SGLang's version and verdict on the first
    configuration); raises ``TargetUnavailable`` (exit 3) at the first host that cannot be used,
    ``DeployFailed`` for options it lacks. On the first host, the space's configurations are also
    counted by what its SGLang runs."""
    lines: list[str] = []
    space = SearchSpace(spec, spec.option_table)
    for index, host in enumerate(spec.target.hosts or (None,)):
        target = make_target(spec if host is None else spec_for_host(spec, host))
        try:
            found = list(target.check_access())
            result = run_preflight(target, spec, space)
            found += [f"preflight: {line}" for line in result.lines] or ["preflight: passed"]
            counted = count_by_sglang(target, space) if index == 0 else None
            if counted is not None:
                distinct, refused, asked = counted
                found.append(f"SGLang {result.installed} runs the {asked:,} distinct valid "
                             f"configurations by spectune's rules as {distinct:,} distinct servers "
                             f"({refused:,} "
                             "refused by SGLang)"
                             + (" — the first ones only" if asked >= COUNT_LIMIT else ""))
        finally:
            target.close()
        lines += [f"{host}: {line}" for line in found] if len(spec.target.hosts) > 1 else found
    return tuple(lines)


def _phase(phase: PhaseSpec, spec: StudySpec, time_scale: float,
           modelled: float | None = None) -> PhaseEstimate:
    tokens = spec.benchmark.workload.max_tokens
    if modelled is not None and modelled > 0:
        rate = modelled
        source = "the simulator's model of this configuration"
    else:
        rate = min(phase.concurrency * ASSUMED_C1_TOK_S, ASSUMED_AGGREGATE_TOK_S) * time_scale
        source = ("assumed: the seed campaign's Qwen3.5-122B server on 4 GPUs, not this study's "
                  "model; unknown until a trial is measured")
    seconds, bound = phase_seconds(phase, tokens, rate)
    scaled = f", ÷ time_scale {time_scale:g}" if time_scale != 1 else ""
    basis = {"requests": f"{phase.warmup + (phase.requests or 0)} requests × ≤ {tokens} tokens at "
                         f"~{rate / time_scale:.0f} tok/s{scaled}, {source}",
             "duration": "its duration", "duration+warmup": "its duration, plus warmup",
             "deadline": "its deadline"}[bound]
    return PhaseEstimate(phase.label, seconds, basis)


def _measured_trial_s(records: Sequence[TrialRecord]) -> float | None:
    """Median deploy + ready + benchmark seconds of the measured trials."""
    totals = [sum(r.timings.get(k, 0.0) for k in ("deploy_s", "ready_s", "benchmark_s"))
              for r in records if r.timings.get("benchmark_s")]
    return statistics.median(totals) if totals else None
