"""The confirmation stage, on by default: re-measure the top K and the baseline on fresh restarts,
then pick the winner by a stated rule.

A study's best is the maximum of noisy measurements, so it is biased upwards (the winner's curse),
and a host that drifts (other work starting, thermal limits) can favour whichever configuration ran
at a quiet moment. So before a winner is declared, the top K configurations and the baseline are
redeployed R times each, **interleaved** — A B C base A B C base … — so that drift hits all of them
alike; only these fresh runs count (the study's own measurement of the top K is the biased one).
Each configuration's runs pool into one set of confirmed figures with 95 % intervals
(objectives.scoring.pooled_phase).

The winner rule (``choose_winner``, docs/scoring.md): the candidate with the best *lower* confidence
bound of its confirmed score wins, and only if that bound is above the baseline's *upper* bound;
otherwise there is no significant improvement over the baseline and the baseline is the answer.
Candidates whose intervals overlap the winner's are named as ties.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import optuna

from objectives.confidence import Interval
from objectives.scoring import PhaseMetrics, constraint_values, is_feasible
from tuner.core.faults import fault_point
from tuner.run.measurement import PhaseMeasurement
from tuner.run.measurer import Measurer
from tuner.run.trial import TrialRunner
from tuner.store.confirmed import ConfirmationStage, store_stage, stored_stage
from tuner.store.record import TrialRecord, measured_records, records
from tuner.study.spec import StudySpec
from tuner.targets.base import DeployFailed

RULE = ("the best lower 95 % bound of the confirmed score wins, if it is above the baseline's "
        "upper bound; else the baseline stays")


@dataclass(frozen=True)
class Verdict:
    """What the winner rule concluded over the confirmed intervals."""

    # the trial to deploy: the best candidate, or the baseline without a significant improvement
    winner: int
    best: int  # the candidate with the best lower bound (== winner when significant)
    # the best lower bound is above the baseline's upper bound (True when there is no baseline)
    significant: bool
    baseline: int | None
    ties: tuple[int, ...]  # other candidates whose confirmed interval overlaps the best one's
    intervals: Mapping[int, Interval]
    #: Why there is no baseline to beat, when there is none (``baseline`` None).
    no_baseline: str = "no baseline was confirmed"

    def explain(self) -> str:
        best = self.intervals[self.best]
        text = f"trial {self.best} has the best lower bound ({best.low:.3f})"
        if self.baseline is None:
            text += f"; {self.no_baseline}, so it wins"
        elif self.significant:
            text += (", above the baseline's upper bound "
                     f"({self.intervals[self.baseline].high:.3f}): it wins")
        else:
            text = (f"no significant improvement over the baseline: {text}, not above the "
                    f"baseline's upper bound ({self.intervals[self.baseline].high:.3f}); the "
                    f"baseline (trial {self.baseline}) stays")
        if self.ties:
            text += "; tie with " + ", ".join(f"trial {t}"
                                              for t in self.ties) + " (intervals overlap)"
        return text


def choose_winner(intervals: Mapping[int, Interval], baseline: int | None, *,
                  no_baseline: str = "no baseline was confirmed") -> Verdict | None:
    """The winner rule over confirmed score intervals by trial number (the baseline's among them, if
    any; ``no_baseline`` says why not, for the explanation).

    Ties between equal lower bounds go to the earlier trial. None when no candidate other than the
    baseline has an interval (then there is nothing to decide)."""
    candidates = {n: i for n, i in intervals.items() if n != baseline}
    if not candidates:
        return None
    best = max(candidates, key=lambda n: (candidates[n].low, -n))
    ties = tuple(sorted(n for n, i in candidates.items() if n != best
                        and i.overlaps(candidates[best])))
    if baseline is None or baseline not in intervals:
        return Verdict(best, best, True, None, ties, dict(intervals), no_baseline)
    significant = candidates[best].low > intervals[baseline].high
    return Verdict(best if significant else baseline, best, significant, baseline, ties,
                   dict(intervals))


def plan(study: optuna.Study, top: int) -> tuple[list[int], int | None]:
    """The top ``top`` candidates other than the baseline, by study score, and the baseline: what to
    confirm."""
    candidates = sorted((r for r in measured_records(study) if r.is_candidate and not r.baseline),
                        key=lambda r: (-(r.score or 0.0), r.number))
    chosen = [r.number for r in candidates[:top]]
    baseline = next((r.number for r in records(study) if r.baseline and r.is_candidate), None)
    return chosen, baseline


def runs_planned(top: int, repeats: int) -> int:
    """How many fresh restarts the stage costs at most (for the ETA): K + the baseline, R times
    each."""
    return (top + 1) * repeats if top > 0 else 0


def confirm_top(study: optuna.Study, spec: StudySpec, runner: TrialRunner, measurer: Measurer, *,
                top: int,
                repeats: int, on_run: Callable[[int, int], None] | None = None) -> Verdict | None:
    """Run the stage (or reuse a finished one for the same plan) and return the rule's verdict.

    ``on_run(trial, run)`` is called before each fresh restart."""
    chosen, baseline = plan(study, top)
    order = [*chosen, *([baseline] if baseline is not None and baseline not in chosen else [])]
    stored = stored_stage(study)
    if stored is None or not stored.is_done(order, repeats):
        measure_stage(study, spec, runner, measurer, order, baseline, repeats, on_run)
    return verdict(study, runner)


def verdict(study: optuna.Study, runner: TrialRunner) -> Verdict | None:
    """The winner rule over the stored confirmation runs, under the study's scorer."""
    scorer = runner.scorer(study)
    stored = stored_stage(study)
    intervals = {}
    for record in records(study):
        if record.confirmed is not None and record.confirmed.runs:
            interval = scorer.interval(record.confirmed.pooled)
            if interval is not None:
                intervals[record.number] = interval
    return choose_winner(intervals, stored.baseline if stored is not None else None)


def measure_stage(study: optuna.Study, spec: StudySpec, runner: TrialRunner,
                  measurer: Measurer, order: list[int], baseline: int | None, repeats: int,
                  on_run: Callable[[int, int], None] | None) -> None:
    """Measure the stage: ``repeats`` fresh restarts of each trial in ``order``, round-robin, the
    stage stored after every run (an interruption keeps them)."""
    by_number = {r.number: r for r in records(study)}
    scorer = runner.scorer(study)
    stage = ConfirmationStage.begin(order, baseline, repeats)
    for run in range(repeats):
        for number in order:  # round-robin: each configuration once per round
            if on_run:
                on_run(number, run)
            metrics = _fresh_run(by_number[number], spec, measurer)
            if metrics is not None and (scorer.score(metrics) is None or not is_feasible(
                    constraint_values(spec.objective.constraints, metrics))):
                metrics = None
            stage = stage.with_run(number, metrics)
            store_stage(study, stage)
    store_stage(study, dataclasses.replace(stage, complete=True))


def _fresh_run(record: TrialRecord, spec: StudySpec,
               measurer: Measurer) -> PhaseMetrics | None:
    assert record.config is not None  # a candidate was deployed
    try:
        measurer.deploy(record.config)
    except DeployFailed:
        return None
    fault_point("confirmation")  # a fresh restart of the stage up, not yet measured
    measured = [PhaseMeasurement.of(p.concurrency, measurer.measure(i)) for i,
                p in enumerate(spec.benchmark.phases)]
    # A phase that failed as a whole (simulator-overloaded) measured the host: a failed run, not a
    # figure.
    return None if any(m.failure for m in measured) else {m.concurrency: dict(m.figures)
                                                          for m in measured}
