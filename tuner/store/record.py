"""One typed record of a stored trial: what the trial runner wrote, read back the same way by every reader.

A trial's result lives in Optuna user attributes (plus its state, values and constraints). ``Key`` names each
attribute once; ``TrialRecord.from_trial`` decodes a ``FrozenTrial`` into typed fields; ``write`` is the one
place attributes are set. The stored names and values are the ones earlier versions wrote, so existing study
databases read unchanged.

What a trial *is* for the study is defined here once:

- ``is_measured``: it used the server, so it counts towards ``n_trials`` (measured or failed to start);
- ``is_benchmarked``: it ran the benchmark itself (not a copied duplicate, not a failed start);
- ``is_scored``: benchmarked, feasible and scored — what the placeholder value of an infeasible trial is the
  median of (a skipped trial's optimistic score included); ``candidate_under`` is the same judgement under
  another ranking's score and feasibility;
- ``is_candidate``: scored with every phase measured — what can be the study's best.

A skipped trial has one meaning wherever it is shown: ``skipped_text`` ("skipped C=64 (could not beat the
best)"), never its optimistic bound as a score (``shown_score`` is None for it).

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
from objectives.scoring import pooled_phase, with_paired
from tuner.sglang.launch import ServerConfig
from tuner.targets.base import FailureCause
from tuner.targets.classify import cause_of


class Outcome(enum.StrEnum):
    """What happened to a trial. The first six are stored (``Key.OUTCOME``); the others are never stored but
    derived from the Optuna state of a trial without a stored outcome."""

    MEASURED = "measured"
    DEPLOY_FAILED = "deploy-failed"
    REJECTED = "rejected"
    DUPLICATE = "duplicate"
    TAKEN = "taken"  # FAIL: another worker was measuring the same configuration
    #: FAIL: a phase failed as a whole (``failure_class``, e.g. simulator-overloaded) on every attempt; its
    #: figures are stored for inspection, the sampler is told nothing, and the point is queued again
    PHASE_FAILED = "phase-failed"
    #: COMPLETE: the server started but the configuration failed while measured — it crashed or hung under load,
    #: or its outputs differ from the reference's (``failure_class`` crashed-under-load, hung, wrong-output). It
    #: counts, is infeasible for every sampler, is never a candidate nor confirmed, and is not queued again.
    RUN_FAILED = "run-failed"
    INTERRUPTED = "interrupted"  # FAIL otherwise: an interrupt, a lost lease or a worker failed as stale
    RUNNING = "running"  # RUNNING: being measured now
    QUEUED = "queued"  # WAITING: enqueued, not started yet


class RejectedBy(enum.StrEnum):
    """Who refused a rejected proposal (``Key.REJECTED_BY``): kept apart wherever a rejection is shown."""

    SGLANG = "sglang"  # the target's own SGLang, asked before deploying (tuner/targets/resolver.py)
    RULES = "rules"  # spectune's rules (tuner/sglang/rules.py, held to the real SGLang) or option table

    @property
    def label(self) -> str:
        return "refused by SGLang" if self is RejectedBy.SGLANG else "refused by spectune's rules"


#: How a refusal by the target's own SGLang reads (tuner.targets.resolver.refusal): how the records stored before
#: ``Key.REJECTED_BY`` existed are told apart.
_SGLANG_REFUSAL = " refuses this configuration (exit "


STORED_OUTCOMES: Final = frozenset({Outcome.MEASURED, Outcome.DEPLOY_FAILED, Outcome.REJECTED,
                                    Outcome.DUPLICATE, Outcome.TAKEN, Outcome.PHASE_FAILED, Outcome.RUN_FAILED})


class Key:
    """Trial user attribute names (reports, ``best``, ``deploy`` and old databases rely on these exact names)."""

    OUTCOME: Final = "outcome"  # an Outcome of STORED_OUTCOMES
    COUNTS: Final = "counts"  # True when the trial used the server (counts towards n_trials)
    SCORE: Final = "score"  # a skipped trial's is its optimistic bound (what the sampler is told), never shown
    SCORE_CI: Final = "score_ci"  # [low, high]: the score's 95 % interval (None for a skipped trial)
    PARAMS_DECODED: Final = "params_decoded"  # the proposal's flag values, before repairs
    REPAIRS: Final = "repairs"
    REASON: Final = "reason"  # why a proposal was rejected
    REJECTED_BY: Final = "rejected_by"  # a RejectedBy: the target's own SGLang, or spectune's rules
    CONFIG: Final = "config"  # ServerConfig.to_json()
    CONFIG_KEY: Final = "config_key"  # the effective key (Proposal.key): stored first, so other workers see it
    EFFECTIVE: Final = "effective"  # what SGLang runs: auto-chosen tree, page size, backend, graphs, request cap
    PHASES: Final = "phases"  # concurrency (as a string) → that phase's metrics
    SKIPPED_PHASES: Final = "skipped_phases"
    SKIP: Final = "skip"  # the bound that made the remaining phases not worth running
    FAILURE_CLASS: Final = "failure_class"
    FAILURE: Final = "failure"
    FAILURE_CAUSE: Final = "failure_cause"  # a FailureCause (tuner/targets/classify.py): what the samplers read
    #: Evidence of a failure while measured: {"phase": "c64", "concurrency": 64, "exit": "...", "errors": {...},
    #: "completed": n, "failed": n} (crashed-under-load, hung).
    RUN_FAILURE: Final = "run_failure"
    #: The output check (tuner/run/outputs.py): statistic, floor, threshold, verdict and one example.
    OUTPUT_CHECK: Final = "output_check"
    LOG_TAIL: Final = "log_tail"
    LOG: Final = "log"  # where the server's log is (deploy fact)
    LAUNCH: Final = "launch"  # the launch command (deploy fact)
    BASE_URL: Final = "base_url"  # deploy fact
    TIMINGS: Final = "timings"  # deploy_s, ready_s, benchmark_s
    HOST: Final = "host"
    BASELINE: Final = "baseline"  # set when the baseline is enqueued
    DUPLICATE_OF: Final = "duplicate_of"
    TAKEN_BY: Final = "taken_by"
    OUTCOME_OF_ORIGINAL: Final = "outcome_of_original"  # copied onto a duplicate when the original has it
    RETRY_OF: Final = "retry_of"  # set when an interrupted trial's parameters are enqueued again
    NEIGHBOUR_OF: Final = "neighbour_of"  # set when a neighbour of a repeated proposal is enqueued
    #: "adaptive" or "off": SGLang's own choice measured beside the tuning (tuner/search/references.py)
    REFERENCE: Final = "reference"


#: What a measurer's ``deploy`` reports that is stored on the trial (timings are merged separately).
DEPLOY_FACTS: Final = (Key.LAUNCH, Key.BASE_URL, Key.LOG)
#: What a duplicate copies from the trial whose result it reuses.
REUSED: Final = (Key.OUTCOME_OF_ORIGINAL, Key.PHASES, Key.FAILURE_CLASS, Key.FAILURE, Key.SKIPPED_PHASES,
                 Key.SKIP, Key.LAUNCH, Key.FAILURE_CAUSE, Key.RUN_FAILURE, Key.OUTPUT_CHECK)


class StudyKey:
    """Study user attribute names."""

    UNIT_OPTIONS: Final = "unit_options_carried"  # the unit's own options deploys keep (unit_flags = "carry")
    REFERENCES: Final = "references"  # concurrency (as a string) → the metric a score of 1.0 stands for
    REFERENCES_TRIAL: Final = "references_trial"  # the trial whose measurement the references are
    #: {"baseline": n | None, "order": [n, …], "trials": {"n": {"runs": [phases, …], "failed": k}}}: the
    #: confirmation stage's fresh runs (each run's phases stored as ``Key.PHASES`` is), in the order measured.
    CONFIRMATION: Final = "confirmation"
    BASELINE_ENQUEUED: Final = "baseline_enqueued"
    SAMPLER: Final = "sampler"
    SGLANG_VERSION: Final = "sglang_version"  # the SGLang installed on the target, as its preflight found it
    #: The output check's reference: {"trial": n, "outputs": [...], "floor": {...}} (tuner/run/outputs.py).
    OUTPUT_REFERENCE: Final = "output_reference"
    #: Why the study turned the output check off ([check] outputs = false): stored so every reader sees it.
    OUTPUT_CHECK_OFF: Final = "output_check_off"

    @staticmethod
    def interrupted(number: int) -> str:
        return f"interrupted_{number}"

    @staticmethod
    def sglang_table(version: str, build: str) -> str:
        """The option table a target's SGLang ``version`` (``build``) supplied (tuner/store/tables.py)."""
        return f"sglang_table:{version}:{build}"


def write(trial: optuna.Trial, attrs: Mapping[str, Any]) -> None:
    """Store ``attrs`` on ``trial`` — the only way the engine writes a trial's record. An ``Outcome`` is stored
    as its plain string, so the value is the same in every storage (the in-memory one keeps objects as is)."""
    for key, value in attrs.items():
        trial.set_user_attr(key, str(value) if isinstance(value, Outcome) else value)


@dataclass(frozen=True)
class Confirmed:
    """A configuration's fresh runs from the confirmation stage: what its confirmed figures rest on."""

    runs: tuple[Mapping[int, Mapping[str, Any]], ...]  # each run's phase metrics (feasible runs only)
    failed: int  # restarts that failed to start, or measured infeasible / without a score
    #: The confirmed baseline's runs: run k of this configuration pairs with its run k (the same prompts).
    reference: tuple[Mapping[int, Mapping[str, Any]], ...] = ()

    @property
    def pooled(self) -> dict[int, dict[str, Any]]:
        """Each phase over every run (objectives.scoring.pooled_phase): the confirmed figures, with each primary
        metric's interval paired with the confirmed baseline's runs (``<metric>_paired_ci``) where they kept
        their per-request parts — the baseline's own is then [m, m]: its score is what the others are
        compared with."""
        pooled = _pooled(self.runs)
        return with_paired(pooled, _pooled(self.reference)) if self.reference else pooled


def _pooled(runs: tuple[Mapping[int, Mapping[str, Any]], ...]) -> dict[int, dict[str, Any]]:
    concurrencies = sorted({c for run in runs for c in run})
    return {c: pooled_phase([run[c] for run in runs if c in run]) for c in concurrencies}


def confirmations(stored: Any) -> dict[int, Confirmed]:
    """``StudyKey.CONFIRMATION`` as stored → the fresh runs by trial number (an older list form: none)."""
    if not isinstance(stored, Mapping):
        return {}
    decoded = {int(number): (tuple(decode_phases(run) for run in entry.get("runs") or ()),
                             int(entry.get("failed") or 0))
               for number, entry in (stored.get("trials") or {}).items()}
    baseline = stored.get("baseline")
    reference = decoded[baseline][0] if isinstance(baseline, int) and baseline in decoded else ()
    return {number: Confirmed(runs, failed, reference) for number, (runs, failed) in decoded.items()}


def skipped_text(phases: Iterable[int]) -> str:
    """What a trial whose phases were skipped is called everywhere it is shown."""
    return f"skipped {','.join(f'C={c}' for c in phases)} (could not beat the best)"


@dataclass(frozen=True)
class TrialRecord:
    """A stored trial, decoded. Build it with ``from_trial`` (a stored trial) or ``from_attrs`` (the attributes
    a running trial is about to end with)."""

    number: int
    state: TrialState
    outcome: Outcome | None  # None: COMPLETE without a (known) stored outcome, e.g. told by hand; or PRUNED
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
    #: The values SGLang runs (tuner.sglang.rules.Verdict.effective); None values were SGLang's to choose.
    effective: Mapping[str, Any] | None = None
    metrics: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)  # per phase, by concurrency
    skipped_phases: tuple[int, ...] = ()
    skip: Mapping[str, Any] | None = None
    constraints: Mapping[str, float] = field(default_factory=dict)
    failure_class: str | None = None
    failure: str | None = None
    #: The typed cause (stored, or decided from the class and text for records written before causes were).
    failure_cause: FailureCause | None = None
    run_failure: Mapping[str, Any] | None = None
    output_check: Mapping[str, Any] | None = None
    log_tail: str | None = None
    log: str | None = None
    host: str | None = None
    baseline: bool = False
    duplicate_of: int | None = None
    taken_by: int | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    launch: str | None = None
    values: tuple[float, ...] | None = None
    duration_s: float | None = None  # start to completion, for finished trials
    confirmed: Confirmed | None = None  # the confirmation stage's runs of this configuration (``records``)

    @classmethod
    def from_trial(cls, trial: FrozenTrial) -> TrialRecord:
        duration = None
        if trial.datetime_start is not None and trial.datetime_complete is not None:
            duration = (trial.datetime_complete - trial.datetime_start).total_seconds()
        values = tuple(trial.values) if trial.values is not None else None
        return cls.from_attrs(trial.number, trial.state, trial.user_attrs, trial.constraints or {},
                              values=values, duration_s=duration)

    @classmethod
    def from_attrs(cls, number: int, state: TrialState, attrs: Mapping[str, Any], constraints: Mapping[str, float],
                   *, values: tuple[float, ...] | None = None, duration_s: float | None = None) -> TrialRecord:
        config = attrs.get(Key.CONFIG)
        score = attrs.get(Key.SCORE)
        skip = attrs.get(Key.SKIP)
        return cls(
            number=number,
            state=state,
            outcome=_outcome(state, attrs.get(Key.OUTCOME)),
            counts=bool(attrs.get(Key.COUNTS)),
            score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
            score_ci=Interval.from_stored(attrs.get(Key.SCORE_CI)),
            params_decoded=dict(attrs.get(Key.PARAMS_DECODED) or {}),
            repairs=tuple(attrs.get(Key.REPAIRS) or ()),
            reason=attrs.get(Key.REASON),
            rejected_by=_rejected_by(state, attrs),
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
            values=values,
            duration_s=duration_s,
        )

    # ----- what the trial is for the study -------------------------------------------------------------
    @property
    def complete(self) -> bool:
        return self.state == TrialState.COMPLETE

    @property
    def feasible(self) -> bool:
        """Every stored constraint satisfied (Optuna's convention: ≤ 0)."""
        return all(v <= 0 for v in self.constraints.values())

    @property
    def is_measured(self) -> bool:
        """Used the server: counts towards ``n_trials`` (measured or failed to start; not free reuses)."""
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
        """Can be the study's best: scored, and no phase was skipped (a skipped trial's stored score is only
        its optimistic bound)."""
        return self.is_scored and not self.skipped_phases

    def candidate_under(self, score: float | None, *, feasible: bool) -> bool:
        """A candidate for best with ``score`` and ``feasible`` as some ranking judges them (tuner/query/ranking.py
        rescores from the stored metrics, so a phase its weights do not need may be missing)."""
        return self.is_benchmarked and feasible and score is not None

    @property
    def shown_score(self) -> float | None:
        """The score a user is shown: None for a skipped trial (its stored score is only an optimistic bound)."""
        return None if self.skipped_phases else self.score

    @property
    def skip_bounds(self) -> dict[int, float]:
        """The optimistic values the skipped phases were assumed to reach (empty when none was skipped)."""
        return skip_bounds(self.skip)


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


def _rejected_by(state: TrialState, attrs: Mapping[str, Any]) -> RejectedBy | None:
    if _outcome(state, attrs.get(Key.OUTCOME)) is not Outcome.REJECTED:
        return None
    stored = attrs.get(Key.REJECTED_BY)
    if isinstance(stored, str) and stored in {r.value for r in RejectedBy}:
        return RejectedBy(stored)
    return RejectedBy.SGLANG if _SGLANG_REFUSAL in str(attrs.get(Key.REASON) or "") else RejectedBy.RULES


def skip_bounds(skip: Mapping[str, Any] | None) -> dict[int, float]:
    """A stored ``Key.SKIP`` → the bound assumed for each skipped phase, by concurrency."""
    return {int(c): float(v) for c, v in ((skip or {}).get("bounds") or {}).items()}


def decode_phases(stored: Mapping[str, Any] | None) -> dict[int, dict[str, Any]]:
    """``{"1": {...}, "64": {...}}`` as stored → metrics by concurrency."""
    return {int(c): dict(m) for c, m in (stored or {}).items()}


def encode_phases(metrics: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """Metrics by concurrency → the stored form (JSON object keys are strings)."""
    return {str(c): m for c, m in metrics.items()}


def records(study: optuna.Study, states: tuple[TrialState, ...] | None = None) -> list[TrialRecord]:
    """Every trial of ``study`` (or those in ``states``), by number, with its confirmation runs attached."""
    confirmed = confirmations(study.user_attrs.get(StudyKey.CONFIRMATION))
    out = [TrialRecord.from_trial(t) for t in study.get_trials(deepcopy=False, states=states)]
    return [dataclasses.replace(r, confirmed=confirmed[r.number]) if r.number in confirmed else r for r in out]


def measured_records(study: optuna.Study) -> list[TrialRecord]:
    """The trials that count towards ``n_trials``."""
    return [r for r in records(study, (TrialState.COMPLETE,)) if r.is_measured]


def best_record(study: optuna.Study) -> TrialRecord | None:
    """The candidate with the highest stored score (ties: the earlier trial); None when there is none."""
    return best_of(records(study, (TrialState.COMPLETE,)))


def best_of(candidates: Iterable[TrialRecord]) -> TrialRecord | None:
    """``best_record`` among ``candidates`` (e.g. the first N measured: what the study would have picked then)."""
    return max((r for r in candidates if r.is_candidate), key=lambda r: (r.score or 0.0, -r.number), default=None)
