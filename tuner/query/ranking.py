"""Every stored trial seen through one set of weights and constraints — the basis of best, trials and report.

Scores are recomputed from each trial's stored raw phase metrics with ``objectives.scoring.Scorer`` (the one
definition of the score, docs/scoring.md), so ``--weights`` re-ranks a study without re-running anything.

Feasibility under a ranking = the constraints stored on the trial (SGLang's rules, the server starting, the study
file's constraints) all satisfied, **and** every extra ``--constraint`` satisfied. An extra constraint on a phase
the trial did not measure (a skipped C=64) is not known to hold, so such a trial is not feasible under it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from objectives.scoring import Scorer, constraint_values, phase_value
from tuner.engine.trial import CONFIG, OUTCOME, PHASES
from tuner.sglang.launch import FlagValue, ServerConfig
from tuner.study.spec import ConstraintSpec, StudySpec


@dataclass(frozen=True)
class TrialView:
    """One stored trial under a ranking. ``score`` is None when a weighted phase has no measurement."""

    number: int
    state: str  # Optuna's state name: COMPLETE, FAIL, RUNNING, WAITING, PRUNED
    outcome: str | None  # measured | deploy-failed | rejected | duplicate (COMPLETE trials); taken (FAIL)
    config: ServerConfig | None
    tuned: Mapping[str, FlagValue]  # the study's tuned flags as deployed (absent: not set, e.g. speculation off)
    metrics: Mapping[int, Mapping[str, Any]]
    score: float | None
    violations: Mapping[str, float]  # constraint → amount of violation (> 0), stored and extra together
    failure_class: str | None = None
    duplicate_of: int | None = None
    baseline: bool = False
    skipped_phases: tuple[int, ...] = ()  # phases not run because they could not beat the incumbent

    @property
    def feasible(self) -> bool:
        return self.state == "COMPLETE" and not self.violations

    @property
    def rankable(self) -> bool:
        """Measured on the server (not a reused duplicate), feasible, and every weighted phase scored."""
        return self.outcome == "measured" and self.feasible and self.score is not None

    @property
    def status(self) -> str:
        """A short word for tables: what happened to this trial."""
        if self.state != "COMPLETE":
            # taken: another worker was measuring this configuration at the time (docs/scaling.md)
            return "taken" if self.outcome == "taken" else self.state.lower()
        if self.outcome == "duplicate":
            return f"duplicate of {self.duplicate_of}" if self.duplicate_of is not None else "duplicate"
        if self.outcome == "measured":
            if not self.feasible:
                return "infeasible"
            return "ok" if not self.skipped_phases else "skipped " + ",".join(f"C={c}" for c in self.skipped_phases)
        return self.outcome or "unknown"

    @property
    def failure(self) -> str | None:
        """Why this trial cannot be the answer (its class for reports), or None."""
        if self.state == "FAIL":
            return None if self.outcome == "taken" else "interrupted"
        if self.state != "COMPLETE":
            return None
        if self.outcome == "rejected":
            return "rejected (SGLang rules)"
        if self.outcome == "deploy-failed":
            return self.failure_class or "failed to start"
        if self.violations:
            return "violates " + ", ".join(sorted(self.violations))
        return None

    def value(self, concurrency: int) -> float | None:
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
    def best(self) -> TrialView | None:
        ranked = self.ranked
        return ranked[0] if ranked else None

    @property
    def scorer(self) -> Scorer:
        return Scorer(self.weights, self.references)


def rank(study: optuna.Study, spec: StudySpec, weights: Mapping[int, float] | None = None,
         constraints: Sequence[ConstraintSpec] = ()) -> Ranking:
    """Every trial of ``study`` under ``weights`` (default: the study file's) and the extra ``constraints``."""
    weights = dict(weights or spec.objective.weights)
    trials = study.get_trials(deepcopy=False)
    references = references_for(study, trials, weights)
    scorer = Scorer(weights, references)
    tuned_flags = [p.flag for p in spec.search]
    views = tuple(_view(t, scorer, tuple(constraints), tuned_flags) for t in sorted(trials, key=lambda t: t.number))
    concurrencies = tuple(sorted(p.concurrency for p in spec.benchmark.phases))
    return Ranking(weights, references, tuple(constraints), views, concurrencies)


def references_for(study: optuna.Study, trials: Sequence[FrozenTrial],
                   weights: Mapping[int, float]) -> dict[int, float]:
    """The study's stored references; a weighted phase without one takes the baseline's value, else the first
    measured trial's — the same rule the study used for its own (docs/scoring.md)."""
    stored = {int(c): float(v) for c, v in (study.user_attrs.get("references") or {}).items()}
    measured = [t for t in sorted(trials, key=lambda t: (not t.user_attrs.get("baseline"), t.number))
                if t.state == TrialState.COMPLETE and t.user_attrs.get(OUTCOME) == "measured"]
    for concurrency, weight in weights.items():
        if weight <= 0 or stored.get(concurrency):
            continue
        for t in measured:
            value = phase_value(_phases(t), concurrency)
            if value and value > 0:
                stored[concurrency] = value
                break
    return stored


def _view(trial: FrozenTrial, scorer: Scorer, extra: tuple[ConstraintSpec, ...], tuned_flags: list[str]) -> TrialView:
    attrs = trial.user_attrs
    config = ServerConfig.from_json(attrs[CONFIG]) if attrs.get(CONFIG) else None
    flags = config.flag_dict if config is not None else {}
    metrics = _phases(trial)
    complete = trial.state == TrialState.COMPLETE
    violations = {k: v for k, v in (trial.constraints or {}).items() if v > 0}
    if complete and extra and attrs.get(OUTCOME) in ("measured", "duplicate"):
        violations.update({k: v for k, v in constraint_values(extra, metrics).items() if v > 0})
        for c in extra:
            if c.phase is not None and c.phase not in metrics:
                violations[c.text] = float("inf")  # not measured: cannot be shown to hold
    return TrialView(
        number=trial.number,
        state=trial.state.name,
        outcome=attrs.get(OUTCOME) if complete or attrs.get(OUTCOME) == "taken" else None,
        config=config,
        tuned={f: flags[f] for f in tuned_flags if f in flags},
        metrics=metrics,
        score=scorer.score(metrics) if metrics and attrs.get(OUTCOME) in ("measured", "duplicate") else None,
        violations=violations,
        failure_class=attrs.get("failure_class"),
        duplicate_of=attrs.get("duplicate_of"),
        baseline=bool(attrs.get("baseline")),
        skipped_phases=tuple(int(c) for c in attrs.get("skipped_phases") or ()),
    )


def _phases(trial: FrozenTrial) -> dict[int, dict[str, Any]]:
    return {int(c): dict(m) for c, m in (trial.user_attrs.get(PHASES) or {}).items()}
