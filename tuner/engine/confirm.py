"""The optional confirmation stage: re-measure the top configurations on fresh restarts.

A study's winner is the maximum of noisy measurements, so it is biased upwards ("winner's curse"). Redeploying
the top K configurations R times each and comparing their mean scores tells whether the winner is real; the
spread (min–max, standard deviation) is what a report shows next to each.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

import optuna

from objectives.scoring import constraint_values, is_feasible
from tuner.engine.record import StudyKey, TrialRecord, measured_records
from tuner.engine.trial import Measurer, TrialRunner
from tuner.study.spec import StudySpec
from tuner.targets.base import DeployFailed


@dataclass(frozen=True)
class Confirmation:
    trial: int
    original_score: float
    scores: tuple[float, ...]  # one per fresh restart; failed restarts are left out and counted
    failed_restarts: int

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores) if self.scores else float("nan")

    @property
    def stdev(self) -> float:
        return statistics.stdev(self.scores) if len(self.scores) > 1 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"mean": self.mean, "stdev": self.stdev}


def confirm_top(study: optuna.Study, spec: StudySpec, runner: TrialRunner, measurer: Measurer, *, top: int,
                repeats: int) -> list[Confirmation]:
    candidates = [r for r in measured_records(study) if r.is_candidate]
    candidates.sort(key=_score, reverse=True)
    scorer = runner.scorer(study)
    results = []
    for trial in candidates[:top]:
        config = trial.config
        assert config is not None  # a benchmarked trial was deployed
        scores: list[float] = []
        failed = 0
        for _ in range(repeats):
            try:
                measurer.deploy(config)
            except DeployFailed:
                failed += 1
                continue
            metrics = {p.concurrency: dict(measurer.measure(i)) for i, p in enumerate(spec.benchmark.phases)}
            score = scorer.score(metrics)
            if score is None or not is_feasible(constraint_values(spec.objective.constraints, metrics)):
                failed += 1
                continue
            scores.append(score)
        results.append(Confirmation(trial.number, _score(trial), tuple(scores), failed))
    study.set_user_attr(StudyKey.CONFIRMATION, [c.to_dict() for c in results])
    return results


def _score(record: TrialRecord) -> float:
    return record.score if record.score is not None else float("-inf")


def confirmed_winner(results: list[Confirmation]) -> Confirmation | None:
    valid = [c for c in results if c.scores]
    return max(valid, key=lambda c: c.mean, default=None)
