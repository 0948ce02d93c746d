"""Every stored trial seen through one set of weights and constraints — the basis of best, trials
and report.

Scores are recomputed from each trial's stored raw phase metrics with ``objectives.scoring.Scorer``
(the one definition of the score, docs/scoring.md), so ``--weights`` re-ranks a study without
re-running anything.

Feasibility under a ranking = the constraints stored on the trial (SGLang's rules, the server
starting, the study file's constraints) all satisfied, **and** every extra ``--constraint``
satisfied — judged on the confirmed figures where the trial was confirmed (the fresh runs pooled:
the study's single measurement of a leader is the biased one), else on that measurement. An extra
constraint on a phase the trial did not measure (a skipped C=64) is not known to
hold, so such a trial is not feasible under it.

Every score comes with its 95 % interval, rescored the same way. When the study ran its confirmation
stage, the confirmed figures (the fresh runs pooled) are scored too, and ``best`` is the winner
rule's choice over them (tuner/run/confirm.py): the best lower bound if it beats the baseline's
upper bound, else the baseline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna

from objectives.confidence import Interval
from objectives.scoring import Assessment, Scorer, constraint_values, phase_value
from tuner.run.confirm import Verdict, choose_winner
from tuner.sglang.launch import FlagValue, ServerConfig
from tuner.store.record import Outcome, RejectedBy, TrialRecord, records, skipped_text
from tuner.store.score import references_for
from tuner.study.spec import ConstraintSpec, StudySpec


@dataclass(frozen=True)
class TrialView:
    """One stored trial (its ``record``) under a ranking. ``score`` is None when a weighted phase
    has no measurement."""

    record: TrialRecord
    # the study's tuned flags as deployed (absent: not set, e.g. speculation off)
    tuned: Mapping[str, FlagValue]
    score: float | None
    # constraint → amount of violation (> 0), stored and extra together
    violations: Mapping[str, float]
    interval: Interval | None = None  # the score's 95 % interval
    # the confirmation stage's runs pooled, scored the same way
    confirmed_score: float | None = None
    confirmed_interval: Interval | None = None

    @property
    def confirmed_runs(self) -> int:
        """How many fresh runs the confirmed figures rest on (0: not confirmed)."""
        confirmed = self.record.confirmed
        return len(confirmed.runs) if confirmed is not None else 0

    @property
    def number(self) -> int:
        return self.record.number

    @property
    def state(self) -> str:
        """Optuna's state name: COMPLETE, FAIL, RUNNING, WAITING, PRUNED."""
        return self.record.state.name

    @property
    def outcome(self) -> Outcome | None:
        return self.record.outcome

    @property
    def config(self) -> ServerConfig | None:
        return self.record.config

    @property
    def metrics(self) -> Mapping[int, Mapping[str, Any]]:
        return self.record.metrics

    @property
    def skipped_phases(self) -> tuple[int, ...]:
        """Phases not run because they could not beat the incumbent."""
        return self.record.skipped_phases

    @property
    def ended(self) -> bool:
        """Finished, one way or another (not waiting in the queue, not running)."""
        return self.state in ("COMPLETE", "FAIL")

    @property
    def feasible(self) -> bool:
        return self.record.complete and not self.violations

    @property
    def rankable(self) -> bool:
        """Benchmarked on the server (not a reused duplicate), feasible under these constraints, and
        every phase these weights need measured. A phase skipped by the study was weighted in the
        study file, so under its weights this is the study's own ``is_candidate``."""
        return self.record.candidate_under(self.score, feasible=self.feasible)

    @property
    def status(self) -> str:
        """A short word for tables: what happened to this trial."""
        if self.state != "COMPLETE":
            # taken: another worker was measuring this configuration at the time (docs/scaling.md)
            if self.outcome is Outcome.PHASE_FAILED:
                return f"failed: {self.record.failure_class}"
            return "taken" if self.outcome is Outcome.TAKEN else self.state.lower()
        if self.outcome is Outcome.RUN_FAILED:
            return f"failed: {self.record.failure_class}"
        if self.outcome is Outcome.DUPLICATE:
            duplicate_of = self.record.duplicate_of
            return f"duplicate of {duplicate_of}" if duplicate_of is not None else "duplicate"
        if self.outcome is Outcome.MEASURED:
            if not self.feasible:
                return "infeasible"
            return "ok" if not self.skipped_phases else skipped_text(self.skipped_phases)
        return str(self.outcome) if self.outcome else "unknown"

    @property
    def failure(self) -> str | None:
        """Why this trial cannot be the answer (its class for reports), or None."""
        if self.state == "FAIL":
            if self.outcome is Outcome.PHASE_FAILED:
                return self.record.failure_class or "phase failed"
            return None if self.outcome is Outcome.TAKEN else "interrupted"
        if self.state != "COMPLETE":
            return None
        if self.outcome is Outcome.REJECTED:
            return (self.record.rejected_by or RejectedBy.RULES).label
        if self.outcome is Outcome.DEPLOY_FAILED:
            return self.record.failure_class or "failed to start"
        if self.outcome is Outcome.RUN_FAILED:
            return self.record.failure_class or "failed while measured"
        if self.violations:
            return "violates " + ", ".join(sorted(self.violations))
        return None

    def value(self, concurrency: int) -> float | None:
        if (self.metrics.get(concurrency) or {}).get("failure"):
            return None  # the phase the server crashed or hung in: its partial figures are no speed
        return phase_value(self.metrics, concurrency)

    def accept_length(self) -> float | None:
        """The speculative acceptance length at the lowest concurrency that reported one."""
        for concurrency in sorted(self.metrics):
            value = self.metrics[concurrency].get("accept_length")
            if value is not None:
                return float(value)
        return None


@dataclass(frozen=True)
class Ranking:
    weights: Mapping[int, float]
    references: Mapping[int, float]
    constraints: tuple[ConstraintSpec, ...]  # the extra ones (``--constraint``)
    trials: tuple[TrialView, ...]  # all trials, by number
    concurrencies: tuple[int, ...] = field(default=())

    @property
    def ranked(self) -> list[TrialView]:
        """Rankable trials, best first (ties: the earlier trial)."""
        rankable = [t for t in self.trials if t.rankable]
        return sorted(rankable, key=lambda t: (-(t.score or 0.0), t.number))

    @property
    def verdict(self) -> Verdict | None:
        """The winner rule over the confirmed trials that are rankable here (None: the study has no
        confirmation under which a candidate qualifies)."""
        confirmed = {t.number: t.confirmed_interval for t in self.trials
                     if t.rankable and t.confirmed_interval is not None}
        baseline = next((t.number for t in self.trials if t.record.baseline
                         and t.number in confirmed), None)
        return choose_winner({n: i for n, i in confirmed.items() if i is not None}, baseline,
                             no_baseline=self._no_baseline())

    def _no_baseline(self) -> str:
        """Why the winner rule has no baseline to beat: never confirmed, or not feasible here."""
        stored = next((t for t in self.trials
                       if t.record.baseline and t.confirmed_interval is not None), None)
        if stored is None:
            return "no baseline was confirmed"
        if stored.violations:
            return (f"the baseline (trial {stored.number}) breaks "
                    f"{', '.join(sorted(stored.violations))} on its confirmed figures")
        return f"the baseline (trial {stored.number}) does not qualify here ({stored.status})"

    @property
    def best(self) -> TrialView | None:
        """The answer — the one winner rule every surface shows (best, trials, report, dashboard):
        the winner rule's choice over the confirmed trials when the study has a confirmation under
        which a candidate qualifies, else the highest score."""
        verdict = self.verdict
        if verdict is not None:
            return next(t for t in self.trials if t.number == verdict.winner)
        return self.leader

    @property
    def leader(self) -> TrialView | None:
        """The highest score under these weights and constraints (ties: the earlier trial)."""
        ranked = self.ranked
        return ranked[0] if ranked else None

    @property
    def unconfirmed_leader(self) -> TrialView | None:
        """The leader when it is not the answer and was never confirmed: the answer rests on a
        confirmation that did not re-measure it (other weights or constraints than the study's make
        another trial lead). Shown beside the answer everywhere; ``spectune confirm`` re-measures it
        against the baseline."""
        leader, answer = self.leader, self.best
        if (leader is None or answer is None or leader.number == answer.number
            or leader.confirmed_runs):
            return None
        return leader

    @property
    def scorer(self) -> Scorer:
        return Scorer(self.weights, self.references)


def rank(study: optuna.Study, spec: StudySpec, weights: Mapping[int, float] | None = None,
         constraints: Sequence[ConstraintSpec] = ()) -> Ranking:
    """Every trial of ``study`` under ``weights`` (default: the study file's) and the extra
    ``constraints``."""
    weights = dict(weights or spec.objective.weights)
    trials = sorted(records(study), key=lambda r: r.number)
    references = references_for(study, trials, weights)
    scorer = Scorer(weights, references)
    tuned_flags = [p.flag for p in spec.search]
    views = tuple(_view(r, scorer, tuple(constraints), tuned_flags) for r in trials)
    concurrencies = tuple(sorted(p.concurrency for p in spec.benchmark.phases))
    return Ranking(weights, references, tuple(constraints), views, concurrencies)


def _view(record: TrialRecord, scorer: Scorer, extra: tuple[ConstraintSpec, ...],
          tuned_flags: list[str]) -> TrialView:
    flags = record.config.flag_dict if record.config is not None else {}
    metrics = record.metrics
    violations = {k: v for k, v in record.constraints.items() if v > 0}
    # its own or a copied measurement
    has_result = record.outcome in (Outcome.MEASURED, Outcome.DUPLICATE)
    confirmed = (record.confirmed.pooled if record.confirmed is not None and record.confirmed.runs
                 else None)
    if record.complete and extra and has_result:
        # On the best evidence there is: the fresh runs pooled where the trial was confirmed (the
        # study's single measurement is the biased one), else that measurement.
        judged = confirmed or metrics
        violations.update({k: v for k, v in constraint_values(extra, judged).items() if v > 0})
        for c in extra:
            if c.phase is not None and c.phase not in judged:
                violations[c.text] = float("inf")  # not measured: cannot be shown to hold
    found = scorer.assess(metrics) if metrics and has_result else Assessment(None, None)
    fresh = scorer.assess(confirmed) if confirmed else Assessment(None, None)
    return TrialView(
        record=record,
        tuned={f: flags[f] for f in tuned_flags if f in flags},
        score=found.score,
        violations=violations,
        interval=found.interval,
        confirmed_score=fresh.score,
        confirmed_interval=fresh.interval,
    )
