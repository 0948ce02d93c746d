"""Evaluating the search on a performance landscape: the study's real loop against a model instead
of a server.

Stable API (docs/benchmarks.md, "Evaluating the search on your own landscape"): ``evaluate_search``,
``SearchResult``, ``Landscape``, ``MeasuredLandscape``, and the re-exported ``Measurer``,
``DeployFailed``, ``RunFailed``, ``FailureCause``, ``make_objective`` and ``ServerConfig`` (random
search, the one-flag sweep and the found-so-far curve: tuner/evaluation/reference_search.py; loading
and caching: tuner/evaluation/landscape_plugin.py).
Their names, parameters and fields only grow, they are not renamed or removed.

``evaluate_search`` runs exactly what ``spectune tune`` runs (tuner/run/loop.py ``run_trials`` with
tuner/run/trial.py ``TrialRunner``: baseline first, duplicates free, a repeat followed by an
unmeasured neighbour, failed starts and violated constraints stored as constraints, the C=64 skip),
on in-memory storage, with any ``Measurer`` in place of target + benchmark. The built-in landscape
is the simulator's noiseless ground truth (``simulator_landscape``), with optional seeded noise;
bench/sample_efficiency.py and the tests' stored studies run through it.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import optuna
from rich.console import Console
from rich.progress import track
from typing_extensions import TypeIs

from objectives.scoring import Scorer, constraint_values, is_feasible, references_from
from objectives.spec import BenchmarkSpec
from tuner.evaluation.landscape_plugin import make_objective, study_of
from tuner.run.loop import Limits, run_trials
from tuner.run.measurement import PhaseFailure, PhaseMeasurement
from tuner.run.measurer import Measurer
from tuner.run.setup import Objectives, adopt, study_sampler
from tuner.run.trial import TrialRunner
from tuner.search.baseline import enqueue_baseline
from tuner.sglang.launch import ServerConfig
from tuner.sglang.options import OptionTable
from tuner.simulator import faults
from tuner.simulator.config import InvalidServerArgs, resolve
from tuner.simulator.ground_truth import expected_metrics
from tuner.simulator.profile import Profile, load_profile
from tuner.simulator.startup import startup_s
from tuner.store.record import TrialRecord, best_of, measured_records
from tuner.study.space import SearchSpace
from tuner.study.spec import ObjectiveSpec, SamplerName, StudySpec
from tuner.targets.base import DeployFailed, FailureCause, RunFailed
from tuner.targets.simulated import simulator_profile

__all__ = ["DeployFailed", "FailureCause", "Landscape", "MeasuredLandscape", "Measurer",
           "OracleMeasurer",
           "RunFailed", "SearchResult", "ServerConfig", "evaluate_search", "make_objective",
           "simulator_landscape", "true_phase_metrics", "true_scores"]

_FAILURE_CLASS = {"flags": "invalid-flags", "config": "invalid-flags", "oom": "out-of-memory",
                  "runtime": "crashed"}


class Landscape(Protocol):
    """A performance model of one deployment: measurers for the search, and the truth to judge its
    pick by.

    Optional attributes (tuner/evaluation/landscape_plugin.py ``study_of``): ``study`` (a
    ``StudySpec`` or a study file path relative to the landscape's own file: objective, baseline,
    benchmark and space), ``objective`` (``ObjectiveSpec``) and ``baseline`` (flag → value)
    replacing the study's, ``version`` (keys its cached truth)."""

    def measurer(self, seed: int) -> Measurer:
        """A fresh measurer for one search (``seed``: of its measurement noise, if it has any)."""

    def true_score(self, config: ServerConfig) -> float | None:
        """The noiseless score of ``config`` (any positive scale), or None where it cannot be the
        answer (fails to start, violates a constraint)."""


@dataclass(frozen=True)
class SearchResult:
    """What one search did: every trial, why it stopped, and what it picked (what a user would
    deploy)."""

    spec: StudySpec  # the study as searched: its sampler and seed are those of this search
    study: optuna.Study
    stopped_by: str  # n_trials | timeout | exhausted, as from `spectune tune`
    best: TrialRecord | None  # the pick; None for a Pareto study or when no trial was feasible

    @property
    def trials(self) -> tuple[optuna.trial.FrozenTrial, ...]:
        return tuple(self.study.get_trials(deepcopy=False))

    @property
    def measured(self) -> int:
        """Trials that used the 'server' (what ``n_trials`` counts)."""
        return len(measured_records(self.study))

    @property
    def best_config(self) -> ServerConfig | None:
        return self.best.config if self.best is not None else None

    def best_after(self, measured: int) -> TrialRecord | None:
        """The pick as it stood after the first ``measured`` measured trials (a sample-efficiency
        curve)."""
        return best_of(measured_records(self.study)[:measured])


def evaluate_search(study: StudySpec | str | Path | None, landscape: Landscape | Measurer, *,
                    n_trials: int, seed: int = 0, sampler: SamplerName | None = None,
                    storage: optuna.storages.BaseStorage | None = None,
                    designed_start: bool = True) -> SearchResult:
    """Run the study's real loop against ``landscape`` until ``n_trials`` trials were measured (or
    the space is exhausted) and return what it did.

    ``study``: a study file or its loaded spec (its target is not used); None: the landscape's own
    (its ``study`` attribute); a landscape's ``objective`` and ``baseline`` replace the study's.
    ``landscape``: a ``Landscape`` (a fresh measurer is taken with ``seed``) or a bare ``Measurer``
    (used as it is). ``sampler``: auto, gp, tpe or random (default: the study file's); ``seed``
    seeds the sampler. ``storage``: in memory unless given; a stored study of the same name is
    continued. ``designed_start=False``: the baseline only, then the sampler (how plain random
    search is measured, tuner/search/baseline.py)."""
    spec = study_of(landscape, study)
    spec = replace(spec,
                   study=replace(spec.study, sampler=sampler or spec.study.sampler, seed=seed))
    space = SearchSpace(spec, spec.option_table)
    objectives = Objectives.of(spec)
    storage = storage if storage is not None else optuna.storages.InMemoryStorage()
    optuna_study = optuna.create_study(study_name=spec.study.name, storage=storage,
                                       load_if_exists=True,
                                       sampler=study_sampler(spec, space, seed),
                                       directions=objectives.directions)
    with warnings.catch_warnings():  # experimental in name only; `tune` sets the same names
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna_study.set_metric_names(objectives.metric_names)
    adopt(optuna_study, spec)
    # A landscape models the space's configurations: no reference trial outside it
    # (tuner/search/references.py).
    enqueue_baseline(optuna_study, space, spec, designed=designed_start, outside=False)
    measurer = landscape.measurer(seed) if is_landscape(landscape) else landscape
    runner = TrialRunner(spec, space, measurer)
    url = getattr(storage, "url", "in-memory storage")  # only for messages
    # A landscape's baseline is a point of a model, not what an operator runs: one that fails to
    # start says nothing about the search, which goes on and is scored against the truth.
    limits = Limits(n_trials, None, time.monotonic(), stop_on_failed_baseline=False)
    stopped_by = run_trials(optuna_study, runner, limits, url)
    best = None if objectives.pareto else best_of(measured_records(optuna_study))
    return SearchResult(spec, optuna_study, stopped_by, best)


class MeasuredLandscape:
    """A ``Landscape`` from a measurer factory: the truth is what a noiseless measurer answers,
    scored the way a study scores (1.0 = the baseline; the study's constraints apply).

    ``spec``: the study (a ``StudySpec``, or a study file path — relative to the file that builds
    this landscape); ``objective`` / ``baseline``: replace the study's (the landscape's own
    objective and starting point); ``version``: keys its cached truth instead of its sources.
    ``make_measurer(seed)`` gives the search's measurers; ``truth`` (default: ``make_measurer(0)``)
    must be deterministic. Truth needs every distinct valid configuration of the space measured
    once, on first use."""

    def __init__(self, spec: StudySpec | str | Path, make_measurer: Callable[[int], Measurer], *,
                 truth: Measurer | None = None, objective: ObjectiveSpec | None = None,
                 baseline: Mapping[str, Any] | None = None, version: str | None = None) -> None:
        self.objective = objective
        self.baseline = dict(baseline) if baseline is not None else None
        if not isinstance(spec, StudySpec) and not Path(spec).is_absolute():
            # Relative to the file that called us: the landscape's own module (a study file beside
            # it).
            caller = sys._getframe(1).f_globals.get("__file__")
            self.home = Path(caller).resolve().parent if caller else Path.cwd()
        self.study: StudySpec | str | Path = spec
        self.spec = self.study = study_of(self)
        self.make_measurer = make_measurer
        self.version = version
        self._truth = truth
        self._scores: dict[str, float] | None = None

    def measurer(self, seed: int) -> Measurer:
        return self.make_measurer(seed)

    @property
    def truth_measurer(self) -> Measurer | None:
        """The deterministic measurer the truth comes from, as given (None:
        ``make_measurer(0)``)."""
        return self._truth

    def true_score(self, config: ServerConfig) -> float | None:
        return self.true_scores().get(config.key())

    def true_scores(self, *, progress: bool = False) -> dict[str, float]:
        """Config key → true score of every configuration that can be the answer (``progress``: a
        progress bar on stderr while it is computed)."""
        if self._scores is None:
            space = SearchSpace(self.spec, self.spec.option_table)
            self._scores = true_scores(space, self._truth or self.make_measurer(0),
                                       progress=progress)
        return self._scores


def simulator_landscape(spec: StudySpec, *, noise: float = 0.02,
                        profile: str | Profile | None = None
                        ) -> MeasuredLandscape:
    """The built-in landscape: the simulator profile's ground truth (default: the study's ``[target]
    profile``), measured with seeded relative Gaussian ``noise`` on the throughputs."""
    # Only a simulated target names a profile; any other study is evaluated on the default one.
    chosen = profile if profile is not None else simulator_profile(spec.target.settings)
    loaded = chosen if isinstance(chosen,
                                  Profile) else load_profile(chosen) if chosen else load_profile()
    table = spec.option_table
    return MeasuredLandscape(
        spec, lambda seed: OracleMeasurer(loaded, table, spec.benchmark, noise=noise, seed=seed),
        truth=OracleMeasurer(loaded, table, spec.benchmark, timed=False))


def true_scores(space: SearchSpace, measurer: Measurer, *,
                progress: bool = False) -> dict[str, float]:
    """True score of every distinct valid configuration of ``space`` that starts and meets the
    study's constraints, normalised by the baseline's truth exactly as a study normalises by its
    measured baseline. ``progress``: a progress bar on stderr over the space's raw points (rich)."""
    spec = space.spec
    baseline = space.baseline().config if spec.baseline else None
    metrics_by_key: dict[str, dict[int, dict[str, Any]]] = {}
    points: Iterable[dict[str, Any]] = space.points()
    if progress:
        points = track(points, total=space.raw_size(), description="truth: every configuration",
                       console=Console(stderr=True), transient=True)
    for params in points:
        config = space.decode(params).config
        if config is None or config.key() in metrics_by_key:
            continue
        try:
            measurer.deploy(config)
        except DeployFailed:
            metrics_by_key[config.key()] = {}
            continue
        try:
            measured = [PhaseMeasurement.of(phase.concurrency, measurer.measure(index))
                        for index, phase in enumerate(spec.benchmark.phases)]
        except RunFailed:
            measured = [PhaseMeasurement(0, {}, PhaseFailure("run-failed", "run-failed"))]
        # A configuration that crashes, hangs or answers wrongly cannot be the answer whatever its
        # speed.
        metrics_by_key[config.key()] = ({} if any(m.failure for m in measured)
                                        else {m.concurrency: dict(m.figures) for m in measured})
    _say_unreported(spec, metrics_by_key.values())
    reference_metrics = metrics_by_key.get(baseline.key()) if baseline is not None else None
    refs = references_from(reference_metrics or {}, spec.objective.weights) or {}
    scorer = Scorer(spec.objective.weights, refs)
    scores = {}
    for key, metrics in metrics_by_key.items():
        score = scorer.score(metrics) if metrics else None
        if score is not None and is_feasible(constraint_values(spec.objective.constraints,
                                                               metrics)):
            scores[key] = score
    return scores


def _say_unreported(spec: StudySpec,
                    measured: Iterable[Mapping[int, Mapping[str, Any]]]) -> None:
    """Warn of a constraint on a metric the measurer reported for no configuration: a metric no
    phase reports counts as met (a skipped phase's), so that constraint would hold everywhere,
    unseen."""
    reported = {(c, name) for metrics in measured for c, phase in metrics.items() for name in phase}
    for constraint in spec.objective.constraints:
        if not any(name == constraint.metric and constraint.phase in (None, c)
                   for c, name in reported):
            where = f"at C={constraint.phase}" if constraint.phase is not None else "in any phase"
            warnings.warn(f"{spec.path}: constraint {constraint.text!r}: the measurer reported "
                          f"{constraint.metric} {where} for no configuration, so it holds for "
                          "every one", UserWarning, stacklevel=3)


def true_phase_metrics(profile: Profile, argv: list[str],
                       benchmark: BenchmarkSpec) -> dict[int, dict[str, Any]]:
    """Expected per-phase metrics; raises ``InvalidServerArgs`` for a configuration that cannot
    run."""
    out: dict[int, dict[str, Any]] = {}
    for phase in benchmark.phases:
        m = expected_metrics(profile, argv, benchmark.workload, phase.concurrency)
        out[phase.concurrency] = {
            "per_request_tok_s_mean": m.per_request_tok_s, "aggregate_tok_s": m.aggregate_tok_s,
            "accept_length": m.accept_length, "ttft_p99_ms": m.ttft_s * 1000,
            "ttft_mean_ms": m.ttft_s * 1000, "e2e_mean_ms": m.e2e_s * 1000, "error_rate": 0.0,
        }
    return out


class OracleMeasurer:
    """A ``Measurer`` that answers from the simulator's ground truth, with seeded relative noise.

    Its deploys report the simulator's startup model (tuner/simulator/startup.py) as their timings:
    ``ready_s`` = modelled seconds until ready, or until the start fails (also on the
    ``DeployFailed`` it raises); ``deploy_s`` = 0, the model has no unit file to write.
    ``timed=False`` skips that model (the truth needs no timings)."""

    def __init__(self, profile: Profile, table: OptionTable, benchmark: BenchmarkSpec, *,
                 noise: float = 0.0, seed: int = 0, timed: bool = True) -> None:
        self.profile = profile
        self.table = table
        self.benchmark = benchmark
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.timed = timed
        self._metrics: dict[int, dict[str, Any]] = {}
        self.deploys = 0
        self._faults = faults.ActiveFaults()
        self._oom_batch: int | None = None
        self._max_running = 0
        self._served = 0

    def deploy(self, config: ServerConfig) -> Mapping[str, Any]:
        self.deploys += 1
        argv = config.argv(self.table)
        timings = {"deploy_s": 0.0, "ready_s": startup_s(self.profile, argv) if self.timed else 0.0}
        try:
            self._metrics = true_phase_metrics(self.profile, argv, self.benchmark)
        except InvalidServerArgs as exc:
            raise DeployFailed(_FAILURE_CLASS.get(exc.kind, "other"),  # type: ignore[arg-type]
                               str(exc),
                               timings=timings) from None
        self._faults, self._served = faults.ActiveFaults(), 0
        if self.profile.faults:
            resolved = resolve(self.profile, argv, exit_on_error=False)
            self._faults = faults.active(self.profile.faults, resolved.args)
            headroom = resolved.memory.free_for_graphs_gb - resolved.memory.graph_gb
            self._oom_batch = faults.oom_batch(self._faults, headroom, resolved.draft_tokens)
            self._max_running = resolved.max_running_requests
        return {"launch": " ".join(argv), "timings": timings}

    def measure(self, phase_index: int) -> Mapping[str, Any]:
        phase = self.benchmark.phases[phase_index]
        concurrency = phase.concurrency
        failure = self._fault(phase_index, concurrency, (phase.requests or 0) + phase.warmup) \
            if self._faults.any else None
        if failure is not None:
            return {**self._metrics[concurrency], "error_rate": None, **failure}
        metrics = dict(self._metrics[concurrency])
        if self.noise:
            for key in ("per_request_tok_s_mean", "aggregate_tok_s"):
                metrics[key] *= float(1.0 + self.rng.normal(0.0, self.noise))
        return metrics


    def _fault(self, phase_index: int, concurrency: int, requests: int) -> dict[str, Any] | None:
        """The profile's failure modes (tuner/simulator/faults.py) as a ``Measurer`` reports them: a
        phase whose ``failure`` is a run failure (tuner/run/trial.py stores the trial as
        run-failed)."""
        f, batch = self._faults, min(concurrency, self._max_running or concurrency)
        where = {"phase": f"c{concurrency}", "concurrency": concurrency}
        if f.diverge_after_tokens is not None and phase_index == 0:
            return {"failure": "wrong-output", "failure_cause": "wrong-output",
                    "run_failure": where, "failure_message": "outputs leave the reference after "
                                       f"{f.diverge_after_tokens} tokens"}
        if self._oom_batch is not None and batch >= self._oom_batch:
            return {"failure": "crashed-under-load", "failure_cause": "decode-oom",
                    "run_failure": where,
                    "failure_message": "torch.OutOfMemoryError: CUDA out of memory at a decode "
                                       f"batch of {batch} (≥ {self._oom_batch})"}
        if f.errors_above_running is not None and batch > f.errors_above_running:
            return {"failure": "crashed-under-load", "failure_cause": "server-errors",
                    "run_failure": where,
                    "failure_message": f"500s with more than {f.errors_above_running} requests in "
                                       "flight"}
        self._served += requests
        if f.hang_after_requests is not None and self._served > f.hang_after_requests:
            return {"failure": "hung", "failure_cause": "hang", "run_failure": where,
                    "failure_message": f"no progress after {f.hang_after_requests} requests"}
        return None


def is_landscape(value: Landscape | Measurer) -> TypeIs[Landscape]:
    """A landscape (it makes measurers), not a bare measurer."""
    return callable(getattr(value, "measurer", None))
