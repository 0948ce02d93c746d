"""Re-ranking a stored study: weights, extra constraints, references."""

from __future__ import annotations

from pathlib import Path

import optuna

from tuner.query.load import open_stored_study
from tuner.query.options import parse_constraints
from tuner.query.ranking import rank


def _open(path: Path) -> tuple[optuna.Study, object]:
    stored = open_stored_study(path)
    return stored.study, stored.spec


def test_weights_move_the_winner_to_the_fastest_feasible_trial_of_that_phase(
        stored_study: Path) -> None:
    study, spec = _open(stored_study)
    for concurrency in (1, 64):
        ranking = rank(study, spec, {concurrency: 1.0})  # type: ignore[arg-type]
        feasible = [t for t in ranking.trials if t.outcome == "measured" and t.feasible
                    and t.value(concurrency) is not None]
        fastest = max(feasible, key=lambda t: t.value(concurrency) or 0.0)
        assert ranking.best is not None and ranking.best.number == fastest.number
    c1 = rank(study, spec, {1: 1.0}).best  # type: ignore[arg-type]
    c64 = rank(study, spec, {64: 1.0}).best  # type: ignore[arg-type]
    # the fixture has a real trade-off
    assert c1 is not None and c64 is not None and c1.number != c64.number


def test_c1_only_weights_can_rank_a_trial_whose_c64_phase_was_skipped(stored_study: Path) -> None:
    study, spec = _open(stored_study)
    both = rank(study, spec)  # type: ignore[arg-type]
    skipped = [t for t in both.trials if t.skipped_phases]
    assert skipped, "the fixture should contain a skipped C=64 phase"
    assert all(t.score is None and not t.rankable for t in skipped)
    c1 = rank(study, spec, {1: 1.0})  # type: ignore[arg-type]
    by_number = {t.number: t for t in c1.trials}
    assert all(by_number[t.number].rankable for t in skipped if t.feasible)


def test_extra_constraints_filter_and_unmeasured_phases_do_not_pass(stored_study: Path) -> None:
    study, spec = _open(stored_study)
    base = rank(study, spec)  # type: ignore[arg-type]
    assert base.best is not None
    # exclude everything at or below the current winner's C=1
    bound = (base.best.value(1) or 0) + 0.01
    extra = parse_constraints([f"c1.per_request_tok_s_mean > {bound}"], [1, 64])
    tight = rank(study, spec, None, extra)  # type: ignore[arg-type]
    assert all((t.value(1) or 0) > bound for t in tight.ranked)
    assert tight.best is None or tight.best.number != base.best.number
    on_c64 = rank(study, spec, {1: 1.0},  # type: ignore[arg-type]
                  parse_constraints(["c64.error_rate <= 1"], [1, 64]))
    assert all(not t.rankable for t in on_c64.trials if t.skipped_phases)


def test_failures_and_statuses_are_classified(stored_study: Path) -> None:
    study, spec = _open(stored_study)
    ranking = rank(study, spec)  # type: ignore[arg-type]
    statuses = {t.status for t in ranking.trials}
    assert {"ok", "infeasible", "deploy-failed"} <= statuses
    oom = [t for t in ranking.trials if t.status == "deploy-failed"]
    assert all(t.failure == "out-of-memory" and t.score is None for t in oom)
    assert all(t.failure and t.failure.startswith("violates ") for t in ranking.trials
               if t.status == "infeasible")


def test_references_fall_back_to_the_baseline_when_not_stored(stored_study: Path) -> None:
    study, spec = _open(stored_study)
    stored_refs = rank(study, spec).references  # type: ignore[arg-type]
    study.set_user_attr("references", {})  # as if the study predates stored references
    fallback = rank(study, spec).references  # type: ignore[arg-type]
    assert fallback == stored_refs  # the baseline (trial 0) is the reference run either way
