"""One typed record of a stored trial: what the trial runner wrote, read back the same way by every
reader.

A trial's result lives in Optuna user attributes (plus its state, values and constraints). ``Key``
(tuner/store/keys.py) names each attribute once; ``TrialRecord.from_stored`` decodes a
``FrozenTrial`` into typed fields, ``TrialRecord.to_attrs`` encodes a record the runner built, and
``write`` is the one place attributes are set. The stored names and values are the ones earlier
versions wrote, so existing study databases read unchanged.

What a trial *is* for the study is defined here once:

- ``is_measured``: it used the server, so it counts towards ``n_trials`` (measured or failed to
  start);
- ``is_benchmarked``: it ran the benchmark itself (not a copied duplicate, not a failed start);
- ``is_scored``: benchmarked, feasible and scored — what the placeholder value of an infeasible
  trial is the median of (a skipped trial's optimistic score included); ``candidate_under`` is the
  same judgement under another ranking's score and feasibility;
- ``is_candidate``: scored with every phase measured — what can be the study's best.

A skipped trial has one meaning wherever it is shown: ``skipped_text`` ("skipped C=64 (could not
beat the best)"), never its optimistic bound as a score (``shown_score`` is None for it).

The confirmation stage's fresh runs live on the study (a finished trial cannot be written to) under
``StudyKey.CONFIRMATION``; ``records`` attaches them to each record as ``confirmed``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import optuna
from optuna.trial import FrozenTrial, TrialState

from objectives.confidence import Interval
from objectives.scoring import PhaseMetrics
from tuner.sglang.launch import ServerConfig
from tuner.store.confirmed import Confirmed, confirmations
from tuner.store.keys import Key, StudyKey
from tuner.store.phases import decode_phases, encode_phases, skip_bounds
from tuner.targets.base import FailureCause
from tuner.targets.classify import cause_of


class Outcome(enum.StrEnum):
    """What happened to a trial. The first six are stored (``Key.OUTCOME``); the others are never
    stored but derived from the Optuna state of a trial without a stored outcome."""

    MEASURED = "measured"
    DEPLOY_FAILED = "deploy-failed"
    REJECTED = "rejected"
    DUPLICATE = "duplicate"
    TAKEN = "taken"  # FAIL: another worker was measuring the same configuration
    #: FAIL: a phase failed as a whole (``failure_class``, e.g. simulator-overloaded) on every
    #: attempt; its figures are stored for inspection, the sampler is told nothing, and the point is
    #: queued again
    PHASE_FAILED = "phase-failed"
    #: COMPLETE: the server started but the configuration failed while measured — it crashed or hung
    #: under load, or its outputs differ from the reference's (``failure_class`` crashed-under-load,
    #: hung, wrong-output). It counts, is infeasible for every sampler, is never a candidate nor
    #: confirmed, and is not queued again.
    RUN_FAILED = "run-failed"
    # FAIL otherwise: an interrupt, a lost lease or a worker failed as stale
    INTERRUPTED = "interrupted"
    RUNNING = "running"  # RUNNING: being measured now
    QUEUED = "queued"  # WAITING: enqueued, not started yet


class RejectedBy(enum.StrEnum):
    """Who refused a rejected proposal (``Key.REJECTED_BY``): kept apart wherever a rejection is
    shown."""

    SGLANG = "sglang"  # the target's own SGLang, asked before deploying (tuner/targets/resolver.py)
    # spectune's rules (tuner/sglang/rules.py, held to the real SGLang) or option table
    RULES = "rules"

    @property
    def label(self) -> str:
        return "refused by SGLang" if self is RejectedBy.SGLANG else "refused by spectune's rules"


#: How a refusal by the target's own SGLang reads (tuner.targets.resolver.refusal): how the records
#: stored before ``Key.REJECTED_BY`` existed are told apart.
_SGLANG_REFUSAL = " refuses this configuration (exit "


STORED_OUTCOMES: Final = frozenset({Outcome.MEASURED, Outcome.DEPLOY_FAILED, Outcome.REJECTED,
                                    Outcome.DUPLICATE, Outcome.TAKEN, Outcome.PHASE_FAILED,
                                    Outcome.RUN_FAILED})


def write(trial: optuna.Trial, record: TrialRecord, *, since: TrialRecord | None = None) -> None:
    """Store ``record`` on ``trial`` — the only way the engine writes a trial's record; with
    ``since`` (what was stored before), only the attributes that changed."""
    before = since.to_attrs() if since is not None else {}
    for key, value in record.to_attrs().items():
        if key not in before or before[key] != value:
            trial.set_user_attr(key, value)


def skipped_text(phases: Iterable[int]) -> str:
    """What a trial whose phases were skipped is called everywhere it is shown."""
    return f"skipped {','.join(f'C={c}' for c in phases)} (could not beat the best)"


@dataclass(frozen=True)
class TrialRecord:
    """A trial, typed: decoded from storage (``from_stored``), or the draft the trial runner builds
    as the trial goes and stores with ``write`` (``to_attrs`` is its stored form)."""

    number: int
    state: TrialState
    # None: COMPLETE without a (known) stored outcome, e.g. told by hand; or PRUNED
    outcome: Outcome | None
    counts: bool  # used the server: counts towards n_trials
    score: float | None
    score_ci: Interval | None = None
    params_decoded: Mapping[str, Any] = field(default_factory=dict)
    repairs: tuple[str, ...] = ()
    reason: str | None = None
    #: Who refused a rejected proposal (None for any other outcome).
    rejected_by: RejectedBy | None = None
    config: ServerConfig | None = None
    config_key: str | None = None
    #: The values SGLang runs (tuner.sglang.rules.Verdict.effective); None values were SGLang's to
    #: choose.
    effective: Mapping[str, object] | None = None
    # per phase, by concurrency
    metrics: PhaseMetrics = field(default_factory=dict)
    skipped_phases: tuple[int, ...] = ()
    skip: Mapping[str, object] | None = None
    constraints: Mapping[str, float] = field(default_factory=dict)
    failure_class: str | None = None
    failure: str | None = None
    #: The typed cause (stored, or decided from the class and text for records written before causes
    #: were).
    failure_cause: FailureCause | None = None
    run_failure: Mapping[str, object] | None = None
    output_check: Mapping[str, object] | None = None
    log_tail: str | None = None
    log: str | None = None
    host: str | None = None
    baseline: bool = False
    duplicate_of: int | None = None
    taken_by: int | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    launch: str | None = None
    base_url: str | None = None  # where the benchmark connected (deploy fact)
    values: tuple[float, ...] | None = None
    duration_s: float | None = None  # start to completion, for finished trials
    # the confirmation stage's runs of this configuration (``records``)
    confirmed: Confirmed | None = None

    @classmethod
    def from_stored(cls, trial: FrozenTrial) -> TrialRecord:
        duration = None
        if trial.datetime_start is not None and trial.datetime_complete is not None:
            duration = (trial.datetime_complete - trial.datetime_start).total_seconds()
        values = tuple(trial.values) if trial.values is not None else None
        return cls.from_attrs(trial.number, trial.state, trial.user_attrs, trial.constraints or {},
                              values=values, duration_s=duration)

    @classmethod
    def from_attrs(cls, number: int, state: TrialState, attrs: Mapping[str, Any],
                   constraints: Mapping[str, float], *, values: tuple[float, ...] | None = None,
                   duration_s: float | None = None) -> TrialRecord:
        config = attrs.get(Key.CONFIG)
        score = attrs.get(Key.SCORE)
        skip = attrs.get(Key.SKIP)
        outcome = _outcome(state, attrs.get(Key.OUTCOME))
        rejected_by = _rejected_by(outcome, attrs)
        return cls(
            number=number,
            state=state,
            outcome=outcome,
            counts=bool(attrs.get(Key.COUNTS)),
            score=float(score) if isinstance(score, int | float) and not isinstance(score, bool)
            else None, score_ci=Interval.from_stored(attrs.get(Key.SCORE_CI)),
            params_decoded=dict(attrs.get(Key.PARAMS_DECODED) or {}),
            repairs=tuple(attrs.get(Key.REPAIRS) or ()),
            reason=attrs.get(Key.REASON),
            rejected_by=rejected_by,
            config=ServerConfig.from_json(config) if config else None,
            config_key=attrs.get(Key.CONFIG_KEY),
            effective=dict(attrs[Key.EFFECTIVE]) if attrs.get(Key.EFFECTIVE) else None,
            metrics=decode_phases(attrs.get(Key.PHASES)),
            skipped_phases=tuple(int(c) for c in attrs.get(Key.SKIPPED_PHASES) or ()),
            skip=dict(skip) if skip else None,
            constraints={k: float(v) for k, v in constraints.items()},
            failure_class=attrs.get(Key.FAILURE_CLASS),
            failure=attrs.get(Key.FAILURE),
            failure_cause=_cause(attrs),
            run_failure=dict(attrs[Key.RUN_FAILURE]) if attrs.get(Key.RUN_FAILURE) else None,
            output_check=dict(attrs[Key.OUTPUT_CHECK]) if attrs.get(Key.OUTPUT_CHECK) else None,
            log_tail=attrs.get(Key.LOG_TAIL),
            log=attrs.get(Key.LOG),
            host=attrs.get(Key.HOST),
            baseline=bool(attrs.get(Key.BASELINE)),
            duplicate_of=attrs.get(Key.DUPLICATE_OF),
            taken_by=attrs.get(Key.TAKEN_BY),
            timings=dict(attrs.get(Key.TIMINGS) or {}),
            launch=attrs.get(Key.LAUNCH),
            base_url=attrs.get(Key.BASE_URL),
            values=values,
            duration_s=duration_s,
        )

    def to_attrs(self) -> dict[str, object]:
        """The user attributes this record is stored as — the inverse of ``from_attrs`` (names and
        value forms are the ones earlier versions wrote). A field at its default is not written;
        outcome and ``counts`` go together, and a benchmarked trial always names its skipped phases
        (none: an empty list)."""
        attrs: dict[str, object] = {
            Key.HOST: self.host, Key.PARAMS_DECODED: dict(self.params_decoded) or None,
            Key.REPAIRS: list(self.repairs) or None, Key.REASON: self.reason,
            Key.REJECTED_BY: str(self.rejected_by) if self.rejected_by else None,
            Key.CONFIG: self.config.to_json() if self.config else None,
            Key.CONFIG_KEY: self.config_key,
            Key.EFFECTIVE: dict(self.effective) if self.effective is not None else None,
            Key.LAUNCH: self.launch, Key.BASE_URL: self.base_url, Key.LOG: self.log,
            Key.TIMINGS: dict(self.timings) or None, Key.OUTPUT_CHECK: _plain(self.output_check),
            Key.PHASES: encode_phases(self.metrics) if self.metrics else None,
            Key.SKIP: _plain(self.skip),
            Key.SCORE: self.score, Key.SCORE_CI: self.score_ci.to_list() if self.score_ci else None,
            Key.FAILURE_CLASS: self.failure_class, Key.FAILURE: self.failure,
            Key.FAILURE_CAUSE: str(self.failure_cause) if self.failure_cause else None,
            Key.RUN_FAILURE: _plain(self.run_failure), Key.LOG_TAIL: self.log_tail,
            Key.DUPLICATE_OF: self.duplicate_of, Key.TAKEN_BY: self.taken_by,
            Key.BASELINE: True if self.baseline else None,
        }
        if self.outcome in STORED_OUTCOMES:
            attrs[Key.OUTCOME] = str(self.outcome)
            attrs[Key.COUNTS] = self.counts
        if self.outcome is Outcome.MEASURED or self.skipped_phases:
            attrs[Key.SKIPPED_PHASES] = list(self.skipped_phases)
        return {key: value for key, value in attrs.items() if value is not None}

    # ----- what the trial is for the study --------------------------------------------------------
    @property
    def complete(self) -> bool:
        return self.state == TrialState.COMPLETE

    @property
    def feasible(self) -> bool:
        """Every stored constraint satisfied (Optuna's convention: ≤ 0)."""
        return all(v <= 0 for v in self.constraints.values())

    @property
    def is_measured(self) -> bool:
        """Used the server: counts towards ``n_trials`` (measured or failed to start; not free
        reuses)."""
        return self.complete and self.counts

    @property
    def is_benchmarked(self) -> bool:
        """Ran the benchmark itself (a duplicate only copies another trial's result)."""
        return self.is_measured and self.outcome is Outcome.MEASURED

    @property
    def is_scored(self) -> bool:
        """Benchmarked, feasible and with a score (a skipped trial's is its optimistic bound)."""
        return self.candidate_under(self.score, feasible=self.feasible)

    @property
    def is_candidate(self) -> bool:
        """Can be the study's best: scored, and no phase was skipped (a skipped trial's stored score
        is only its optimistic bound)."""
        return self.is_scored and not self.skipped_phases

    def candidate_under(self, score: float | None, *, feasible: bool) -> bool:
        """A candidate for best with ``score`` and ``feasible`` as some ranking judges them
        (tuner/query/ranking.py rescores from the stored metrics, so a phase its weights do not need
        may be missing)."""
        return self.is_benchmarked and feasible and score is not None

    @property
    def shown_score(self) -> float | None:
        """The score a user is shown: None for a skipped trial (its stored score is only an
        optimistic bound)."""
        return None if self.skipped_phases else self.score

    @property
    def skip_bounds(self) -> dict[int, float]:
        """The optimistic values the skipped phases were assumed to reach (empty when none was
        skipped)."""
        return skip_bounds(self.skip)


def _plain(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return dict(value) if value else None


def _cause(attrs: Mapping[str, Any]) -> FailureCause | None:
    stored = attrs.get(Key.FAILURE_CAUSE)
    if isinstance(stored, str) and stored in FailureCause.__members__.values():
        return FailureCause(stored)
    text = "\n".join(str(attrs.get(k) or "") for k in (Key.FAILURE, Key.LOG_TAIL))
    return cause_of(attrs.get(Key.FAILURE_CLASS), text)


def _outcome(state: TrialState, stored: Any) -> Outcome | None:
    known = Outcome(stored) if isinstance(stored, str) and stored in STORED_OUTCOMES else None
    if state == TrialState.COMPLETE:
        return known
    if state == TrialState.FAIL:
        return known if known in (Outcome.TAKEN, Outcome.PHASE_FAILED) else Outcome.INTERRUPTED
    if state == TrialState.RUNNING:
        return Outcome.RUNNING
    if state == TrialState.WAITING:
        return Outcome.QUEUED
    return None


def _rejected_by(outcome: Outcome | None, attrs: Mapping[str, Any]) -> RejectedBy | None:
    if outcome is not Outcome.REJECTED:
        return None
    stored = attrs.get(Key.REJECTED_BY)
    if isinstance(stored, str) and stored in {r.value for r in RejectedBy}:
        return RejectedBy(stored)
    return (RejectedBy.SGLANG if _SGLANG_REFUSAL in str(attrs.get(Key.REASON) or "")
            else RejectedBy.RULES)


def records(study: optuna.Study, states: tuple[TrialState, ...] | None = None) -> list[TrialRecord]:
    """Every trial of ``study`` (or those in ``states``), by number, with its confirmation runs
    attached."""
    confirmed = confirmations(study.user_attrs.get(StudyKey.CONFIRMATION))
    out = [TrialRecord.from_stored(t) for t in study.get_trials(deepcopy=False, states=states)]
    return [dataclasses.replace(r, confirmed=confirmed[r.number]) if r.number in confirmed else r
            for r in out]


def measured_records(study: optuna.Study) -> list[TrialRecord]:
    """The trials that count towards ``n_trials``."""
    return [r for r in records(study, (TrialState.COMPLETE,)) if r.is_measured]


def best_record(study: optuna.Study) -> TrialRecord | None:
    """The candidate with the highest stored score (ties: the earlier trial); None when there is
    none."""
    return best_of(records(study, (TrialState.COMPLETE,)))


def best_of(candidates: Iterable[TrialRecord]) -> TrialRecord | None:
    """``best_record`` among ``candidates`` (e.g. the first N measured: what the study would have
    picked then)."""
    return max((r for r in candidates if r.is_candidate), key=lambda r: (r.score or 0.0, -r.number),
               default=None)
