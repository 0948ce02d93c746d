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
from typing import Any, Protocol, runtime_checkable

import optuna
from optuna.trial import FrozenTrial, TrialState

from objectives.scoring import STARTED_KEY, VALID_KEY, Scorer, constraint_values, is_feasible, phase_value, with_paired
from tuner.core.interrupts import defer_from_here
from tuner.run.output_check import check_outputs
from tuner.search.samplers import SkippedPhases, skipped_phases
from tuner.sglang.launch import ServerConfig
from tuner.store.record import (
    DEPLOY_FACTS,
    REUSED,
    Key,
    Outcome,
    RejectedBy,
    StudyKey,
    TrialRecord,
    encode_phases,
    measured_records,
    skip_bounds,
    write,
)
from tuner.store.score import fix_references, reference_phases, study_scorer, trial_score
from tuner.study.space import Proposal, SearchSpace, effective_key
from tuner.study.spec import StudySpec
from tuner.targets.base import RUN_FAILURE_CLASSES, DeployFailed, RunFailed, SGLangRefused
from tuner.targets.classify import cause_of

#: The optimistic bound for a phase not measured yet: the best value seen so far times this.
SKIP_BOUND_FACTOR = 1.15
#: Skipping needs this many fully measured feasible trials to know what "best seen" means.
SKIP_MIN_TRIALS = 3
LOG_TAIL_CHARS = 4000


class Measurer(Protocol):
    """Deploys a configuration and measures one benchmark phase at a time. A measurer may also ``resolve`` a
    configuration without deploying it (``Resolving``): the target's own SGLang then decides its identity."""

    def deploy(self, config: ServerConfig) -> Mapping[str, Any]:
        """Start ``config`` and return facts to store (``DEPLOY_FACTS`` and ``timings``). Raises ``DeployFailed``."""

    def measure(self, phase_index: int) -> Mapping[str, Any]:
        """Run phase ``phase_index`` of the study's benchmark on the deployed server; its metrics as a dict."""


@runtime_checkable
class Resolving(Protocol):
    def resolve(self, config: ServerConfig) -> Mapping[str, Any] | None:
        """The effective values the target's SGLang runs for ``config`` (None: it cannot be asked); raises
        ``DeployFailed`` when it refuses the command line."""


def _log_of(exc: DeployFailed) -> dict[str, Any]:
    """The failed server's log location, when the measurer added one (``TargetMeasurer.deploy``)."""
    return {Key.LOG: exc.log} if exc.log else {}


#: Attempts at a phase that failed as a whole (``failure`` in its metrics: objectives/overload.py) on one
#: deployment before the trial gives up: a busy host is often busy for seconds, not minutes.
PHASE_ATTEMPTS = 2


class PhaseFailed(Exception):
    """A phase failed on every attempt (e.g. ``simulator-overloaded``). The trial ends FAIL — the sampler learns
    nothing from a figure that measured the host — with its attempts stored, and the loop queues it again."""

    def __init__(self, failure_class: str, message: str) -> None:
        super().__init__(f"{failure_class}: {message}")
        self.failure_class = failure_class


class ConfigTaken(Exception):
    """Another worker is measuring this configuration right now. The trial ends FAIL (samplers ignore FAIL; the
    other worker's RUNNING trial already tells them the point is pending) and counts as free."""


@dataclass
class TrialEvents:
    """Hooks for the live view and the study loop; every one is optional."""

    on_stage: Callable[[int, str], None] | None = None
    #: Called with the record the trial ends with, just before Optuna stores its state.
    on_done: Callable[[TrialRecord], None] | None = None
    #: Called once the trial's configuration is visible to other workers (its config key is stored) or it was
    #: rejected — the point after which a worker may let the next one ask (tuner/run/loop.py).
    on_proposed: Callable[[], None] | None = None
    #: Called with the trial's number and the flag values it is about to deploy (the live view shows them then,
    #: not only once the trial ends).
    on_deploy: Callable[[int, Mapping[str, Any]], None] | None = None


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
            write(trial, {Key.HOST: self.host})
        proposal = self.space.suggest(trial)
        attrs: dict[str, Any] = {Key.PARAMS_DECODED: dict(proposal.values), Key.REPAIRS: list(proposal.repairs)}
        if proposal.config is None:
            self._proposed()
            return self._finish(trial, attrs, Outcome.REJECTED, {VALID_KEY: 1.0}, metrics=None,
                                extra={Key.REASON: proposal.reason, Key.REJECTED_BY: RejectedBy.RULES.value})
        config = proposal.config
        attrs[Key.CONFIG] = config.to_json()
        # What SGLang will run, and the key of those values: another spelling of one server is a duplicate. The
        # target's own SGLang, where it can be asked, has the last word (a refusal is a rejection: no restart).
        try:
            resolved = self.measurer.resolve(config) if isinstance(self.measurer, Resolving) else None
        except DeployFailed as exc:
            self._proposed()
            judge = RejectedBy.SGLANG if isinstance(exc, SGLangRefused) else RejectedBy.RULES
            return self._finish(trial, attrs, Outcome.REJECTED, {VALID_KEY: 1.0}, metrics=None,
                                extra={Key.REASON: str(exc).removeprefix("invalid-flags: "),
                                       Key.REJECTED_BY: judge.value})
        attrs[Key.EFFECTIVE] = dict(resolved) if resolved is not None else proposal.effective
        attrs[Key.CONFIG_KEY] = (effective_key(config, dict(resolved)) if resolved is not None
                                 else proposal.key or config.key())
        # Store the key *before* looking for others with it: of two workers proposing one configuration at the
        # same moment, at least one then sees the other's key (each write commits before its own read), so the
        # configuration is never measured twice even without the loop's ask lock.
        write(trial, {Key.CONFIG_KEY: attrs[Key.CONFIG_KEY]})
        previous = self._already_measured(trial.study, attrs[Key.CONFIG_KEY], exclude=trial.number)
        self._proposed()
        if previous is not None and previous.state == TrialState.RUNNING:
            return self._taken(trial, attrs, previous)
        if previous is not None:
            return self._reuse(trial, attrs, previous)
        return self._measure(trial, attrs, proposal)

    # ----- the paths ----------------------------------------------------------------------------------
    def _measure(self, trial: optuna.Trial, attrs: dict[str, Any], proposal: Proposal) -> float | tuple[float, float]:
        assert proposal.config is not None
        # What is about to be deployed, stored before the deploy: a trial interrupted from here on still shows
        # the flags it requested and ran with (not "none" and "–").
        write(trial, {k: attrs[k] for k in (Key.PARAMS_DECODED, Key.REPAIRS, Key.CONFIG, Key.EFFECTIVE) if k in attrs})
        if self.events.on_deploy:
            self.events.on_deploy(trial.number, dict(proposal.values))
        self._stage(trial, "deploy")
        started = time.monotonic()
        try:
            facts = self.measurer.deploy(proposal.config)
        except DeployFailed as exc:
            attrs[Key.TIMINGS] = {"deploy_s": time.monotonic() - started, **exc.timings}
            cause = exc.cause or cause_of(exc.failure_class, f"{exc}\n{exc.log_tail}")
            return self._finish(trial, attrs, Outcome.DEPLOY_FAILED, {STARTED_KEY: 1.0}, metrics=None, counts=True,
                                extra={Key.FAILURE_CLASS: exc.failure_class, Key.FAILURE: str(exc),
                                       Key.FAILURE_CAUSE: str(cause) if cause else None,
                                       Key.LOG_TAIL: exc.log_tail[-LOG_TAIL_CHARS:],
                                       **_log_of(exc)})
        attrs.update({k: facts[k] for k in DEPLOY_FACTS if k in facts})
        if facts.get(Key.EFFECTIVE):  # the target's own SGLang resolved it (tuner/targets/resolver.py): its word
            attrs[Key.EFFECTIVE] = dict(facts[Key.EFFECTIVE])
        timings = dict(facts.get(Key.TIMINGS, {}))
        checked = check_outputs(trial.study, trial, self.spec.check, self.measurer,
                                self.spec.benchmark.workload.temperature)
        if checked is not None:
            attrs[Key.OUTPUT_CHECK] = checked.record
            timings["output_check_s"] = checked.seconds
        if checked is not None and checked.failure is not None:
            attrs[Key.TIMINGS] = timings
            return self._finish(trial, attrs, Outcome.RUN_FAILED, {STARTED_KEY: 1.0}, metrics=None, counts=True,
                                extra={Key.FAILURE_CLASS: "wrong-output", Key.FAILURE_CAUSE: "wrong-output",
                                       Key.FAILURE: checked.failure})
        bench_started = time.monotonic()
        metrics: dict[int, dict[str, Any]] = {}
        phases = self.spec.benchmark.phases
        skipped: list[int] = []
        for index, phase in enumerate(phases):
            bound = self._skip_bound(trial.study, metrics) if index > 0 else None
            if bound is not None:
                skipped = [p.concurrency for p in phases[index:]]
                attrs[Key.SKIP] = bound
                break
            self._stage(trial, f"C={phase.concurrency}")
            metrics[phase.concurrency] = result = self._measure_phase(trial, index)
            if result.get("failure") in RUN_FAILURE_CLASSES:
                timings["benchmark_s"] = time.monotonic() - bench_started
                attrs[Key.TIMINGS] = timings
                return self._run_failed(trial, attrs, metrics, phase.concurrency, result)
            if result.get("failure"):
                timings["benchmark_s"] = time.monotonic() - bench_started
                self._phase_failed(trial, attrs, timings, metrics, phase.concurrency, result)
        timings["benchmark_s"] = time.monotonic() - bench_started
        attrs[Key.TIMINGS] = timings
        attrs[Key.SKIPPED_PHASES] = skipped
        return self._finish(trial, attrs, Outcome.MEASURED, {}, metrics=metrics, counts=True)

    def _measure_phase(self, trial: optuna.Trial, index: int) -> dict[str, Any]:
        """Phase ``index``, again on the same server when it failed as a whole (up to ``PHASE_ATTEMPTS``)."""
        result: dict[str, Any] = {}
        for attempt in range(1, PHASE_ATTEMPTS + 1):
            if attempt > 1:
                self._stage(trial, f"C={self.spec.benchmark.phases[index].concurrency} again ({result['failure']})")
            try:
                result = dict(self.measurer.measure(index))
            except RunFailed as exc:  # a measurer's typed run failure (a landscape's crash under load)
                result = exc.as_result(self.spec.benchmark.phases[index].concurrency)
            # A run failure is the configuration's: measuring the dead server again would tell nothing new.
            if not result.get("failure") or result.get("failure") in RUN_FAILURE_CLASSES:
                break
        return result

    def _run_failed(self, trial: optuna.Trial, attrs: dict[str, Any], metrics: dict[int, dict[str, Any]],
                    concurrency: int, result: Mapping[str, Any]) -> float | tuple[float, float]:
        """The server crashed, hung or failed a burst of requests in this phase (tuner/run/runcheck.py), or a
        landscape said so: stored with its evidence, infeasible for every sampler, never queued again."""
        failure_class = str(result["failure"])
        cause = result.get("failure_cause") or cause_of(failure_class, str(result.get("log_tail") or ""))
        evidence = dict(result.get("run_failure") or {"phase": f"c{concurrency}", "concurrency": concurrency})
        log_tail = str(result.get("log_tail") or "")
        # Keep the phase's figures for inspection, without the evidence copied into them.
        metrics[concurrency] = {k: v for k, v in result.items()
                                if k not in ("run_failure", "log_tail", "failure_cause")}
        extra = {Key.FAILURE_CLASS: failure_class, Key.FAILURE_CAUSE: str(cause) if cause else None,
                 Key.FAILURE: str(result.get("failure_message") or failure_class), Key.RUN_FAILURE: evidence}
        if log_tail:
            extra[Key.LOG_TAIL] = log_tail[-LOG_TAIL_CHARS:]
        attrs[Key.PHASES] = encode_phases(metrics)
        return self._finish(trial, attrs, Outcome.RUN_FAILED, {STARTED_KEY: 1.0}, metrics=None, counts=True,
                            extra=extra)

    def _phase_failed(self, trial: optuna.Trial, attrs: dict[str, Any], timings: dict[str, Any],
                      metrics: Mapping[int, Mapping[str, Any]], concurrency: int, result: Mapping[str, Any]) -> None:
        defer_from_here()  # the result is being stored: a signal now waits until Optuna's tell is done
        failure_class = str(result["failure"])
        message = f"C={concurrency} failed {PHASE_ATTEMPTS} times: {result.get('failure_message') or failure_class}"
        attrs.update({Key.TIMINGS: timings, Key.PHASES: encode_phases(metrics), Key.OUTCOME: Outcome.PHASE_FAILED,
                      Key.COUNTS: False, Key.FAILURE_CLASS: failure_class, Key.FAILURE: message})
        write(trial, attrs)
        self._done(trial, TrialState.FAIL, attrs, {})
        raise PhaseFailed(failure_class, message)

    def _reuse(self, trial: optuna.Trial, attrs: dict[str, Any], previous: FrozenTrial) -> float | tuple[float, float]:
        """A configuration already measured is not deployed again: copy its result (free, not counted)."""
        defer_from_here()  # the result is being stored: a signal now waits until Optuna's tell is done
        attrs.update({key: previous.user_attrs[key] for key in REUSED if key in previous.user_attrs})
        attrs[Key.DUPLICATE_OF] = previous.number
        constraints = dict(previous.constraints or {})
        for key, value in constraints.items():
            trial.set_constraint(key, value)
        attrs.update({Key.OUTCOME: Outcome.DUPLICATE, Key.COUNTS: False})
        write(trial, attrs)
        self._done(trial, TrialState.COMPLETE, attrs, constraints)
        assert previous.values is not None
        return tuple(previous.values) if self.pareto else previous.values[0]

    def _taken(self, trial: optuna.Trial, attrs: dict[str, Any], running: FrozenTrial) -> float:
        """Another worker is measuring this configuration: give the point up now (free) rather than idle a host
        until that trial ends."""
        defer_from_here()  # the result is being stored: a signal now waits until Optuna's tell is done
        attrs.update({Key.OUTCOME: Outcome.TAKEN, Key.COUNTS: False, Key.TAKEN_BY: running.number})
        write(trial, attrs)
        self._done(trial, TrialState.FAIL, attrs, {})
        raise ConfigTaken(f"configuration {attrs[Key.CONFIG_KEY]} is being measured by trial {running.number}")

    def _finish(self, trial: optuna.Trial, attrs: dict[str, Any], outcome: Outcome, forced: dict[str, float],
                metrics: Mapping[int, Mapping[str, Any]] | None, *, counts: bool = False,
                extra: Mapping[str, Any] | None = None) -> float | tuple[float, float]:
        defer_from_here()  # the result is being stored: a signal now waits until Optuna's tell is done
        attrs.update(extra or {})
        attrs[Key.OUTCOME] = outcome
        attrs[Key.COUNTS] = counts
        constraints = dict.fromkeys(self.constraint_keys, 0.0)
        constraints.update(forced)
        value: float | tuple[float, float]
        if metrics is not None:
            constraints.update(constraint_values(self.spec.objective.constraints, metrics))
            if outcome is Outcome.MEASURED:
                fix_references(trial.study, metrics, self.spec.objective.weights, trial.number)
                # the interval of each phase against the reference run's same requests (common random numbers)
                metrics = with_paired(metrics, reference_phases(trial.study, trial.number, metrics))
            attrs[Key.PHASES] = encode_phases(metrics)
            scorer = self.scorer(trial.study)
            score = trial_score(scorer, metrics, skip_bounds(attrs.get(Key.SKIP)))
            attrs[Key.SCORE] = score
            interval = None if attrs.get(Key.SKIPPED_PHASES) else scorer.interval(metrics)
            attrs[Key.SCORE_CI] = interval.to_list() if interval else None
            value = self._objective_values(metrics, score)
            if attrs.get(Key.SKIP) and not self.pareto \
                    and skipped_phases(trial.study.user_attrs.get(StudyKey.SAMPLER)) is SkippedPhases.AT_MEDIAN:
                value = min(score, self._median_score(trial.study))
            if not is_feasible(constraints):
                value = self._placeholder(trial.study) if not self.pareto else value
        else:
            value = self._placeholder(trial.study)
        constraints = {key: float(v) for key, v in constraints.items()}
        for key, v in constraints.items():
            trial.set_constraint(key, v)
        write(trial, attrs)
        self._done(trial, TrialState.COMPLETE, attrs, constraints)
        return value

    def _objective_values(self, metrics: Mapping[int, Mapping[str, Any]], score: float) -> float | tuple[float, float]:
        if not self.pareto:
            return score
        c_low, c_high = sorted(c for c, w in self.spec.objective.weights.items() if w > 0)
        return (phase_value(metrics, c_low) or 0.0, phase_value(metrics, c_high) or 0.0)

    # ----- helpers ------------------------------------------------------------------------------------
    def scorer(self, study: optuna.Study) -> Scorer:
        """The study's scorer (its references are fixed by the first fully measured trial, tuner/store/score.py)."""
        return study_scorer(study, self.spec.objective.weights)

    def _placeholder(self, study: optuna.Study) -> float | tuple[float, float]:
        """The value of an infeasible trial: dominated for Pareto; about the median for a single objective,
        because GP models the value of infeasible trials too (TPE ignores it)."""
        if self.pareto:
            return (0.0, 0.0)
        return self._median_score(study)

    @staticmethod
    def _median_score(study: optuna.Study) -> float:
        scores = [r.score for r in measured_records(study) if r.is_scored and r.score is not None]
        return statistics.median(scores) if scores else 1.0

    def _already_measured(self, study: optuna.Study, key: str, *,
                          exclude: int | None = None) -> FrozenTrial | None:
        """The trial that measured the configuration keyed ``key`` (COMPLETE, preferred) or is measuring it now
        (RUNNING: another worker's trial with the same config key), or None."""
        running = None
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)):
            if t.number == exclude or t.user_attrs.get(Key.CONFIG_KEY) != key:
                continue
            record = TrialRecord.from_trial(t)
            if record.is_measured:
                return t
            if record.state == TrialState.RUNNING and running is None:
                running = t
        return running

    def _skip_bound(self, study: optuna.Study, metrics: Mapping[int, Mapping[str, Any]]) -> dict[str, Any] | None:
        """Skip the remaining phases when even an optimistic bound on them cannot beat the incumbent.

        The bound for an unmeasured phase is the best value any candidate trial reached × SKIP_BOUND_FACTOR."""
        if not self.skip_phases or skipped_phases(study.user_attrs.get(StudyKey.SAMPLER)) is SkippedPhases.NEVER:
            return None
        complete = [r for r in measured_records(study) if r.is_candidate]
        if len(complete) < SKIP_MIN_TRIALS:
            return None
        scorer = self.scorer(study)
        incumbent = max(r.score or 0.0 for r in complete)
        bounds: dict[int, float] = {}
        for concurrency in scorer.normalized_weights:
            if concurrency in metrics:
                continue
            best = max((phase_value(r.metrics, concurrency) or 0.0) for r in complete)
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

    def _done(self, trial: optuna.Trial, state: TrialState, attrs: Mapping[str, Any],
              constraints: Mapping[str, float]) -> None:
        if self.events.on_done:
            self.events.on_done(TrialRecord.from_attrs(trial.number, state, attrs, constraints))
