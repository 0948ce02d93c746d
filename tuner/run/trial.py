"""One trial, end to end: propose → check/repair → (reuse | deploy → ready → phases) → score.

The runner is the Optuna objective. It never raises for anything a configuration can cause: a
rejected point, a server that fails to start and a benchmark full of errors all end as COMPLETE
trials with constraints, so the sampler learns to avoid them (reference/optuna-5.0-notes.md §4).
Only the target being unreachable (``TargetUnavailable``) or an interruption propagates.

How a configuration is measured is behind ``Measurer`` (tuner/run/measurer.py); what a trial tells
its caller besides its value, in tuner/run/trial_events.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Final

import optuna
from optuna.trial import FrozenTrial, TrialState

from objectives.scoring import (
    STARTED_KEY,
    VALID_KEY,
    Judged,
    PhaseMetrics,
    Scorer,
    is_feasible,
    phase_value,
)
from tuner.core.interrupts import defer_from_here, held
from tuner.run.measurement import DeployFacts, PhaseFailure, PhaseFigures, PhaseMeasurement
from tuner.run.measurer import Measurer, Resolving
from tuner.run.output_check import check_outputs
from tuner.run.running_trial import RunningTrial
from tuner.run.trial_events import ConfigTaken, PhaseFailed, TrialEvents
from tuner.search.samplers import SkippedPhases
from tuner.sglang.launch import ServerConfig
from tuner.store.record import Outcome, RejectedBy, TrialRecord
from tuner.store.score import score_benchmarked, study_scorer
from tuner.study.proposal import effective_key
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec
from tuner.targets.base import DeployFailed, FailureCause, RunFailed, SGLangRefused
from tuner.targets.classify import cause_of

#: The optimistic bound for a phase not measured yet: the best value seen so far times this.
SKIP_BOUND_FACTOR = 1.15
#: Skipping needs this many fully measured feasible trials to know what "best seen" means.
SKIP_MIN_TRIALS = 3
LOG_TAIL_CHARS = 4000


#: What a duplicate copies from the record of the trial whose result it reuses.
REUSED: Final = ("metrics", "failure_class", "failure", "skipped_phases", "skip", "launch",
                 "failure_cause", "run_failure", "output_check")


#: Attempts at a phase that failed as a whole (``failure`` in its metrics: objectives/overload.py)
#: on one deployment before the trial gives up: a busy host is often busy for seconds, not minutes.
PHASE_ATTEMPTS = 2


class TrialRunner:
    """The Optuna objective. The trial's record is a typed draft (``TrialRecord``) from the first
    step on: each path fills it in with ``dataclasses.replace`` and the running trial's ``save``
    stores what changed (tuner/run/running_trial.py)."""

    def __init__(self, spec: StudySpec, space: SearchSpace, measurer: Measurer,
                 events: TrialEvents | None = None, *, skip_phases: bool = True,
                 host: str | None = None) -> None:
        self.spec = spec
        self.space = space
        self.measurer = measurer
        self.events = events or TrialEvents()
        self.skip_phases = skip_phases and spec.objective.mode == "weighted"
        self.pareto = spec.objective.mode == "pareto"
        self.constraint_keys = (VALID_KEY, STARTED_KEY,
                                *(c.text for c in spec.objective.constraints))
        #: The number of the trial being run (or last run): what an interruption re-queues.
        self.current: int | None = None
        #: Which host this runner deploys to, stored on each trial (several workers: who measured
        #: what).
        self.host = host

    # The Optuna objective.
    def __call__(self, trial: optuna.Trial) -> float | tuple[float, float]:
        self.current = trial.number
        # From here on the trial is one object (tuner/run/running_trial.py: why); what the queue
        # put on it (the baseline mark) is part of its record from the start.
        running = RunningTrial(trial)
        return self._run(running)

    def _run(self, trial: RunningTrial) -> float | tuple[float, float]:
        # From the sampler's values to their first save, a signal waits (milliseconds): Optuna
        # stores each value as it is suggested, so one landing in between left an interrupted trial
        # whose parameters are queued again but whose record shows "flags requested: none".
        with held():
            proposal = trial.propose(self.space)
            draft = replace(trial.stored, host=self.host, params_decoded=dict(proposal.values),
                            repairs=tuple(proposal.repairs))
            if proposal.config is None:
                self._proposed()
                # _finish defers from its start: the loop raises the signal after Optuna's tell
                return self._finish(trial,
                                    replace(draft, outcome=Outcome.REJECTED,
                                            reason=proposal.reason, rejected_by=RejectedBy.RULES),
                                    {VALID_KEY: 1.0})
            config = proposal.config
            draft = replace(draft, config=config)
            # Stored at once, before SGLang is asked (the target's resolver can take seconds): a
            # trial interrupted from here on shows what it requested.
            trial.save(draft)
        # What SGLang will run, and the key of those values: another spelling of one server is a
        # duplicate. The target's own SGLang, where it can be asked, has the last word (a refusal is
        # a rejection: no restart).
        try:
            resolved = (self.measurer.resolve(config) if isinstance(self.measurer, Resolving)
                        else None)
        except DeployFailed as exc:
            self._proposed()
            judge = RejectedBy.SGLANG if isinstance(exc, SGLangRefused) else RejectedBy.RULES
            return self._finish(trial, replace(draft, outcome=Outcome.REJECTED, rejected_by=judge,
                                               reason=str(exc).removeprefix("invalid-flags: ")),
                                {VALID_KEY: 1.0})
        draft = replace(draft, effective=dict(resolved) if resolved is not None
                        else proposal.effective,
                        config_key=(effective_key(config, dict(resolved)) if resolved is not None
                                    else proposal.key or config.key()))
        assert draft.config_key is not None
        # Store the key *before* looking for others with it: of two workers proposing one
        # configuration at the same moment, at least one then sees the other's key (each write
        # commits before its own read), so the configuration is never measured twice even without
        # the loop's ask lock.
        trial.save(replace(trial.stored, config_key=draft.config_key))
        previous = trial.already_measured(draft.config_key)
        self._proposed()
        if previous is not None and previous.state == TrialState.RUNNING:
            return self._taken(trial, draft, previous)
        if previous is not None:
            return self._reuse(trial, draft, previous)
        return self._measure(trial, draft, config)

    # ----- the paths ------------------------------------------------------------------------------
    def _measure(self, trial: RunningTrial, draft: TrialRecord,
                 config: ServerConfig) -> float | tuple[float, float]:
        # What is about to be deployed, stored before the deploy: a trial interrupted from here on
        # still shows the flags it requested and ran with (not "none" and "–").
        trial.save(draft)
        if self.events.on_deploy:
            self.events.on_deploy(trial.number, dict(draft.params_decoded))
        self._stage(trial, "deploy")
        started = time.monotonic()
        try:
            facts = DeployFacts.of(self.measurer.deploy(config))
        except DeployFailed as exc:
            cause = exc.cause or cause_of(exc.failure_class, f"{exc}\n{exc.log_tail}")
            return self._finish(trial, replace(
                draft, outcome=Outcome.DEPLOY_FAILED, counts=True, failure_class=exc.failure_class,
                failure=str(exc),
                failure_cause=cause, log_tail=exc.log_tail[-LOG_TAIL_CHARS:], log=exc.log or None,
                timings={"deploy_s": time.monotonic() - started, **exc.timings}),
                                {STARTED_KEY: 1.0})
        # The target's own SGLang resolved it (tuner/targets/resolver.py): its word on the effective
        # values.
        draft = replace(draft, launch=facts.launch, base_url=facts.base_url, log=facts.log,
                        effective=facts.effective or draft.effective)
        timings = dict(facts.timings)
        checked = check_outputs(trial, self.spec.check, self.measurer,
                                self.spec.benchmark.workload.temperature)
        if checked is not None:
            draft = replace(draft, output_check=checked.record)
            timings["output_check_s"] = checked.seconds
        if checked is not None and checked.failure is not None:
            return self._finish(trial, replace(
                draft, outcome=Outcome.RUN_FAILED, counts=True, timings=timings,
                failure_class="wrong-output",
                failure_cause=FailureCause("wrong-output"), failure=checked.failure),
                                {STARTED_KEY: 1.0})
        return self._benchmark(trial, draft, timings)

    def _benchmark(self, trial: RunningTrial, draft: TrialRecord, timings: dict[str, float]
                   ) -> float | tuple[float, float]:
        """The study's phases in order, skipping the rest once they cannot make the trial the
        best."""
        started = time.monotonic()
        metrics: dict[int, PhaseFigures] = {}
        phases = self.spec.benchmark.phases
        for index, phase in enumerate(phases):
            bound = self._skip_bound(trial, metrics) if index > 0 else None
            if bound is not None:
                draft = replace(draft, skip=bound,
                                skipped_phases=tuple(p.concurrency for p in phases[index:]))
                break
            self._stage(trial, f"C={phase.concurrency}")
            measured = self._measure_phase(trial, index)
            metrics[phase.concurrency] = measured.figures
            if measured.failure is not None:
                timings["benchmark_s"] = time.monotonic() - started
                draft = replace(draft, timings=timings, metrics=metrics)
                if measured.failure.is_run_failure:
                    return self._run_failed(trial, draft, measured.failure)
                self._phase_failed(trial, draft, measured)
        timings["benchmark_s"] = time.monotonic() - started
        return self._finish(trial,
                            replace(draft, outcome=Outcome.MEASURED, counts=True, timings=timings,
                                    metrics=metrics), {}, scored=True)

    def _measure_phase(self, trial: RunningTrial, index: int) -> PhaseMeasurement:
        """Phase ``index``, again on the same server when it failed as a whole (up to
        ``PHASE_ATTEMPTS``)."""
        concurrency = self.spec.benchmark.phases[index].concurrency
        measured = PhaseMeasurement(concurrency, {})
        for attempt in range(1, PHASE_ATTEMPTS + 1):
            if attempt > 1 and measured.failure is not None:
                self._stage(trial, f"C={concurrency} again ({measured.failure.failure_class})")
            try:
                measured = PhaseMeasurement.of(concurrency, self.measurer.measure(index))
            # a measurer's typed run failure (a landscape's crash under load)
            except RunFailed as exc:
                measured = PhaseMeasurement.of_run_failed(concurrency, exc)
            # A run failure is the configuration's: measuring the dead server again would tell
            # nothing new.
            if measured.failure is None or measured.failure.is_run_failure:
                break
        return measured

    def _run_failed(self, trial: RunningTrial, draft: TrialRecord, failure: PhaseFailure
                    ) -> float | tuple[float, float]:
        """The server crashed, hung or failed a burst of requests in this phase
        (tuner/run/runcheck.py), or a landscape said so: stored with its evidence, infeasible for
        every sampler, never queued again."""
        cause = failure.cause or cause_of(failure.failure_class, failure.log_tail)
        return self._finish(trial, replace(
            draft, outcome=Outcome.RUN_FAILED, counts=True, failure_class=failure.failure_class,
            failure_cause=cause, failure=failure.message, run_failure=dict(failure.evidence),
            log_tail=failure.log_tail[-LOG_TAIL_CHARS:] or None), {STARTED_KEY: 1.0})

    def _phase_failed(self, trial: RunningTrial, draft: TrialRecord,
                      measured: PhaseMeasurement) -> None:
        # the result is being stored: a signal now waits until Optuna's tell is done
        defer_from_here()
        assert measured.failure is not None
        failure_class = measured.failure.failure_class
        message = (
            f"C={measured.concurrency} failed {PHASE_ATTEMPTS} times: {measured.failure.message}")
        draft = replace(draft, outcome=Outcome.PHASE_FAILED, counts=False,
                        failure_class=failure_class, failure=message)
        trial.save(draft)
        self._done(draft, TrialState.FAIL, {})
        raise PhaseFailed(failure_class, message)

    def _reuse(self, trial: RunningTrial, draft: TrialRecord,
               previous: FrozenTrial) -> float | tuple[float, float]:
        """A configuration already measured is not deployed again: copy its result (free, not
        counted)."""
        # the result is being stored: a signal now waits until Optuna's tell is done
        defer_from_here()
        original = TrialRecord.from_stored(previous)
        draft = replace(draft, outcome=Outcome.DUPLICATE, counts=False,
                        duplicate_of=previous.number,
                        **{name: getattr(original, name) for name in REUSED})
        constraints = dict(previous.constraints or {})
        trial.constrain(constraints)
        trial.save(draft)
        self._done(draft, TrialState.COMPLETE, constraints)
        assert previous.values is not None
        return tuple(previous.values) if self.pareto else previous.values[0]

    def _taken(self, trial: RunningTrial, draft: TrialRecord, running: FrozenTrial) -> float:
        """Another worker is measuring this configuration: give the point up now (free) rather than
        idle a host until that trial ends."""
        # the result is being stored: a signal now waits until Optuna's tell is done
        defer_from_here()
        draft = replace(draft, outcome=Outcome.TAKEN, counts=False, taken_by=running.number)
        trial.save(draft)
        self._done(draft, TrialState.FAIL, {})
        raise ConfigTaken(
            f"configuration {draft.config_key} is being measured by trial {running.number}")

    def _finish(self, trial: RunningTrial, draft: TrialRecord, forced: Mapping[str, float], *,
                scored: bool = False) -> float | tuple[float, float]:
        """Store the trial's end. ``scored``: it was benchmarked — its constraints, score and
        interval are computed here, once."""
        # the result is being stored: a signal now waits until Optuna's tell is done
        defer_from_here()
        constraints = dict.fromkeys(self.constraint_keys, 0.0)
        constraints.update(forced)
        # None: the placeholder (tuner never scored it)
        value: float | tuple[float, float] | None = None
        if scored:
            judged = score_benchmarked(trial.study, trial.number, draft.metrics,
                                       self.spec.objective.weights,
                                       self.spec.objective.constraints, draft.skip_bounds)
            constraints.update(judged.constraints)
            draft = replace(draft, metrics=judged.metrics, score=judged.score,
                            score_ci=judged.assessment.interval)
            value = self._objective_values(judged)
            if draft.skip and not self.pareto \
                    and trial.skipped_phases() is SkippedPhases.AT_MEDIAN:
                value = min(judged.score, trial.median_score())
            if not is_feasible(constraints) and not self.pareto:
                value = None
        if value is None:
            value = self._placeholder(trial)
        constraints = {key: float(v) for key, v in constraints.items()}
        trial.constrain(constraints)
        trial.save(draft)
        self._done(draft, TrialState.COMPLETE, constraints)
        return value

    def _objective_values(self, judged: Judged) -> float | tuple[float, float]:
        if not self.pareto:
            return judged.score
        c_low, c_high = sorted(judged.phase_values)
        return (judged.phase_values[c_low] or 0.0, judged.phase_values[c_high] or 0.0)

    # ----- helpers --------------------------------------------------------------------------------
    def scorer(self, study: optuna.Study) -> Scorer:
        """The study's scorer (its references are fixed by the first fully measured trial,
        tuner/store/score.py)."""
        return study_scorer(study, self.spec.objective.weights)

    def _placeholder(self, trial: RunningTrial) -> float | tuple[float, float]:
        """The value of an infeasible trial: dominated for Pareto; about the median for a single
        objective, because GP models the value of infeasible trials too (TPE ignores it)."""
        if self.pareto:
            return (0.0, 0.0)
        return trial.median_score()

    def _skip_bound(self, trial: RunningTrial,
                    metrics: PhaseMetrics) -> dict[str, object] | None:
        """Skip the remaining phases when even an optimistic bound on them cannot beat the
        incumbent.

        The bound for an unmeasured phase is the best value any candidate trial reached ×
        SKIP_BOUND_FACTOR. A reference trial (adaptive, off) is never cut short: it is there to be
        compared with the winner on every phase, and it is measured once."""
        if (not self.skip_phases or trial.skipped_phases() is SkippedPhases.NEVER
                or trial.is_reference):
            return None
        complete = trial.candidates()
        if len(complete) < SKIP_MIN_TRIALS:
            return None
        scorer = self.scorer(trial.study)
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

    def _stage(self, trial: RunningTrial, stage: str) -> None:
        if self.events.on_stage:
            self.events.on_stage(trial.number, stage)

    def _done(self, draft: TrialRecord, state: TrialState,
              constraints: Mapping[str, float]) -> None:
        if self.events.on_done:
            self.events.on_done(replace(draft, state=state, constraints=dict(constraints)))
