"""One trial, end to end: propose → check/repair → (reuse | deploy → ready → phases) → score.

The runner is the Optuna objective. It never raises for anything a configuration can cause: a rejected point,
a server that fails to start and a benchmark full of errors all end as COMPLETE trials with constraints, so the
sampler learns to avoid them (reference/optuna-5.0-notes.md §4). Only the target being unreachable
(``TargetUnavailable``) or an interruption propagates.

How a configuration is measured is behind ``Measurer``: the study uses a real target and the aiohttp
benchmark; bench/sample_efficiency.py uses the simulator's noiseless ground truth with the same logic.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import optuna
from optuna.trial import FrozenTrial, TrialState

from objectives.scoring import (
    STARTED_KEY,
    VALID_KEY,
    Scorer,
    constraint_values,
    is_feasible,
    phase_value,
    references_from,
)
from tuner.sglang.launch import ServerConfig
from tuner.study.space import Proposal, SearchSpace
from tuner.study.spec import StudySpec
from tuner.targets.base import DeployFailed

#: The optimistic bound for a phase not measured yet: the best value seen so far times this.
SKIP_BOUND_FACTOR = 1.15
#: Skipping needs this many fully measured feasible trials to know what "best seen" means.
SKIP_MIN_TRIALS = 3
LOG_TAIL_CHARS = 4000

# user_attrs keys (reports, `best` and `deploy` read them)
OUTCOME = "outcome"  # measured | deploy-failed | rejected | duplicate | taken
COUNTS = "counts"  # True when the trial used the server (counts towards n_trials)
CONFIG = "config"
CONFIG_KEY = "config_key"
PHASES = "phases"
HOST = "host"


class Measurer(Protocol):
    """Deploys a configuration and measures one benchmark phase at a time."""

    def deploy(self, config: ServerConfig) -> Mapping[str, Any]:
        """Start ``config`` and return facts to store (launch command, timings). Raises ``DeployFailed``."""

    def measure(self, phase_index: int) -> Mapping[str, Any]:
        """Run phase ``phase_index`` of the study's benchmark on the deployed server; its metrics as a dict."""


class ConfigTaken(Exception):
    """Another worker is measuring this configuration right now. The trial ends FAIL (samplers ignore FAIL; the
    other worker's RUNNING trial already tells them the point is pending) and counts as free."""


@dataclass
class TrialEvents:
    """Hooks for the live view and the study loop; every one is optional."""

    on_stage: Callable[[int, str], None] | None = None
    on_done: Callable[[FrozenTrial | None, Mapping[str, Any]], None] | None = None
    #: Called once the trial's configuration is visible to other workers (its config key is stored) or it was
    #: rejected — the point after which a worker may let the next one ask (tuner/engine/loop.py).
    on_proposed: Callable[[], None] | None = None


class TrialRunner:
    def __init__(self, spec: StudySpec, space: SearchSpace, measurer: Measurer,
                 events: TrialEvents | None = None, *, skip_phases: bool = True, host: str | None = None) -> None:
        self.spec = spec
        self.space = space
        self.measurer = measurer
        self.events = events or TrialEvents()
        self.skip_phases = skip_phases and spec.objective.mode == "weighted"
        self.pareto = spec.objective.mode == "pareto"
        self.constraint_keys = (VALID_KEY, STARTED_KEY, *(c.text for c in spec.objective.constraints))
        #: The number of the trial being run (or last run): what an interruption re-queues.
        self.current: int | None = None
        #: Which host this runner deploys to, stored on each trial (several workers: who measured what).
        self.host = host

    # The Optuna objective.
    def __call__(self, trial: optuna.Trial) -> float | tuple[float, float]:
        self.current = trial.number
        if self.host is not None:
            trial.set_user_attr(HOST, self.host)
        proposal = self.space.suggest(trial)
        attrs: dict[str, Any] = {"params_decoded": {k: v for k, v in proposal.values.items()},
                                 "repairs": list(proposal.repairs)}
        if proposal.config is None:
            self._proposed()
            return self._finish(trial, attrs, "rejected", {VALID_KEY: 1.0}, metrics=None,
                                extra={"reason": proposal.reason})
        config = proposal.config
        attrs[CONFIG] = config.to_json()
        attrs[CONFIG_KEY] = config.key()
        # Store the key *before* looking for others with it: of two workers proposing one configuration at the
        # same moment, at least one then sees the other's key (each write commits before its own read), so the
        # configuration is never measured twice even without the loop's ask lock.
        trial.set_user_attr(CONFIG_KEY, attrs[CONFIG_KEY])
        previous = self._already_measured(trial.study, config, exclude=trial.number)
        self._proposed()
        if previous is not None and previous.state == TrialState.RUNNING:
            return self._taken(trial, attrs, previous)
        if previous is not None:
            return self._reuse(trial, attrs, previous)
        return self._measure(trial, attrs, proposal)

    # ----- the paths ----------------------------------------------------------------------------------
    def _measure(self, trial: optuna.Trial, attrs: dict[str, Any], proposal: Proposal) -> float | tuple[float, float]:
        assert proposal.config is not None
        self._stage(trial, "deploy")
        started = time.monotonic()
        try:
            facts = self.measurer.deploy(proposal.config)
        except DeployFailed as exc:
            attrs["timings"] = {"deploy_s": time.monotonic() - started}
            return self._finish(trial, attrs, "deploy-failed", {STARTED_KEY: 1.0}, metrics=None, counts=True,
                                extra={"failure_class": exc.failure_class, "failure": str(exc),
                                       "log_tail": exc.log_tail[-LOG_TAIL_CHARS:]})
        attrs.update({k: v for k, v in facts.items() if k != "timings"})
        timings = dict(facts.get("timings", {}))
        bench_started = time.monotonic()
        metrics: dict[int, dict[str, Any]] = {}
        phases = self.spec.benchmark.phases
        skipped: list[int] = []
        for index, phase in enumerate(phases):
            bound = self._skip_bound(trial.study, metrics) if index > 0 else None
            if bound is not None:
                skipped = [p.concurrency for p in phases[index:]]
                attrs["skip"] = bound
                break
            self._stage(trial, f"C={phase.concurrency}")
            metrics[phase.concurrency] = dict(self.measurer.measure(index))
        timings["benchmark_s"] = time.monotonic() - bench_started
        attrs["timings"] = timings
        attrs["skipped_phases"] = skipped
        return self._finish(trial, attrs, "measured", {}, metrics=metrics, counts=True)

    def _reuse(self, trial: optuna.Trial, attrs: dict[str, Any], previous: FrozenTrial) -> float | tuple[float, float]:
        """A configuration already measured is not deployed again: copy its result (free, not counted)."""
        for key in ("outcome_of_original", PHASES, "failure_class", "failure", "skipped_phases", "skip",
                    "launch"):
            if key in previous.user_attrs:
                attrs[key] = previous.user_attrs[key]
        attrs["duplicate_of"] = previous.number
        for key, value in previous.constraints.items() if previous.constraints else ():
            trial.set_constraint(key, value)
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        trial.set_user_attr(OUTCOME, "duplicate")
        trial.set_user_attr(COUNTS, False)
        self._done(trial, attrs | {OUTCOME: "duplicate"})
        assert previous.values is not None
        return tuple(previous.values) if self.pareto else previous.values[0]

    def _taken(self, trial: optuna.Trial, attrs: dict[str, Any], running: FrozenTrial) -> float:
        """Another worker is measuring this configuration: give the point up now (free) rather than idle a host
        until that trial ends."""
        attrs.update({OUTCOME: "taken", COUNTS: False, "taken_by": running.number})
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        self._done(trial, attrs)
        raise ConfigTaken(f"configuration {attrs[CONFIG_KEY]} is being measured by trial {running.number}")

    def _finish(self, trial: optuna.Trial, attrs: dict[str, Any], outcome: str, forced: dict[str, float],
                metrics: Mapping[int, Mapping[str, Any]] | None, *, counts: bool = False,
                extra: Mapping[str, Any] | None = None) -> float | tuple[float, float]:
        attrs.update(extra or {})
        attrs[OUTCOME] = outcome
        attrs[COUNTS] = counts
        constraints = dict.fromkeys(self.constraint_keys, 0.0)
        constraints.update(forced)
        value: float | tuple[float, float]
        if metrics is not None:
            attrs[PHASES] = {str(c): m for c, m in metrics.items()}
            constraints.update(constraint_values(self.spec.objective.constraints, metrics))
            scorer = self.scorer(trial.study, metrics if outcome == "measured" else None)
            score = scorer.score(metrics)
            if score is None:
                # Only a skipped trial lacks a weighted phase: value it at its (losing) optimistic bound.
                bounds = {int(c): v for c, v in attrs["skip"]["bounds"].items()} if "skip" in attrs else {}
                score = scorer.optimistic_score(metrics, bounds) if bounds else 0.0
            attrs["score"] = score
            value = self._objective_values(metrics, score)
            if not is_feasible(constraints):
                value = self._placeholder(trial.study) if not self.pareto else value
        else:
            value = self._placeholder(trial.study)
        for key, v in constraints.items():
            trial.set_constraint(key, float(v))
        for key, v in attrs.items():
            trial.set_user_attr(key, v)
        self._done(trial, attrs)
        return value

    def _objective_values(self, metrics: Mapping[int, Mapping[str, Any]], score: float) -> float | tuple[float, float]:
        if not self.pareto:
            return score
        c_low, c_high = sorted(c for c, w in self.spec.objective.weights.items() if w > 0)
        return (phase_value(metrics, c_low) or 0.0, phase_value(metrics, c_high) or 0.0)

    # ----- helpers ------------------------------------------------------------------------------------
    def scorer(self, study: optuna.Study, metrics: Mapping[int, Mapping[str, Any]] | None = None) -> Scorer:
        """The study's scorer. The first fully measured trial (the baseline) fixes the references."""
        stored = study.user_attrs.get("references")
        if stored is None and metrics is not None:
            refs = references_from(metrics, self.spec.objective.weights)
            if refs is not None:
                study.set_user_attr("references", {str(c): v for c, v in refs.items()})
                stored = study.user_attrs.get("references") or {str(c): v for c, v in refs.items()}
        references = {int(c): float(v) for c, v in (stored or {}).items()}
        return Scorer(self.spec.objective.weights, references)

    def _placeholder(self, study: optuna.Study) -> float | tuple[float, float]:
        """The value of an infeasible trial: dominated for Pareto; about the median for a single objective,
        because GP models the value of infeasible trials too (TPE ignores it)."""
        if self.pareto:
            return (0.0, 0.0)
        scores = [t.user_attrs["score"] for t in _measured(study) if "score" in t.user_attrs
                  and is_feasible(t.constraints or {})]
        return statistics.median(scores) if scores else 1.0

    def _already_measured(self, study: optuna.Study, config: ServerConfig, *,
                          exclude: int | None = None) -> FrozenTrial | None:
        """The trial that measured ``config`` (COMPLETE, preferred) or is measuring it now (RUNNING: another
        worker's trial with the same config key), or None."""
        key = config.key()
        running = None
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)):
            if t.number == exclude or t.user_attrs.get(CONFIG_KEY) != key:
                continue
            if t.state == TrialState.COMPLETE and t.user_attrs.get(COUNTS):
                return t
            if t.state == TrialState.RUNNING and running is None:
                running = t
        return running

    def _skip_bound(self, study: optuna.Study, metrics: Mapping[int, Mapping[str, Any]]) -> dict[str, Any] | None:
        """Skip the remaining phases when even an optimistic bound on them cannot beat the incumbent.

        The bound for an unmeasured phase is the best value any feasible trial reached × SKIP_BOUND_FACTOR."""
        if not self.skip_phases:
            return None
        complete = [t for t in _measured(study) if not t.user_attrs.get("skipped_phases")
                    and is_feasible(t.constraints or {}) and "score" in t.user_attrs]
        if len(complete) < SKIP_MIN_TRIALS:
            return None
        scorer = self.scorer(study)
        incumbent = max(t.user_attrs["score"] for t in complete)
        bounds: dict[int, float] = {}
        for concurrency in scorer.normalized_weights:
            if concurrency in metrics:
                continue
            best = max((phase_value(_phases(t), concurrency) or 0.0) for t in complete)
            bounds[concurrency] = best * SKIP_BOUND_FACTOR
        if not bounds:
            return None
        optimistic = scorer.optimistic_score(metrics, bounds)
        if optimistic >= incumbent:
            return None
        return {"bounds": {str(c): v for c, v in bounds.items()}, "optimistic_score": optimistic,
                "incumbent_score": incumbent, "factor": SKIP_BOUND_FACTOR}

    def _proposed(self) -> None:
        if self.events.on_proposed:
            self.events.on_proposed()

    def _stage(self, trial: optuna.Trial, stage: str) -> None:
        if self.events.on_stage:
            self.events.on_stage(trial.number, stage)

    def _done(self, trial: optuna.Trial, attrs: Mapping[str, Any]) -> None:
        if self.events.on_done:
            self.events.on_done(None, {"number": trial.number, **attrs})


def _measured(study: optuna.Study) -> list[FrozenTrial]:
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.user_attrs.get(COUNTS) and t.user_attrs.get(OUTCOME) == "measured"]


def _phases(trial: FrozenTrial) -> dict[int, dict[str, Any]]:
    return {int(c): m for c, m in (trial.user_attrs.get(PHASES) or {}).items()}
