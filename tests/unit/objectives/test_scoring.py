from __future__ import annotations

import pytest

from objectives.scoring import Scorer, constraint_values, is_feasible, references_from, violation
from tuner.study.spec import ConstraintSpec

BASE = {1: {"per_request_tok_s_mean": 200.0, "aggregate_tok_s": 200.0},
        64: {"per_request_tok_s_mean": 30.0, "aggregate_tok_s": 1800.0}}


def test_baseline_scores_one_and_units_do_not_decide() -> None:
    scorer = Scorer({1: 0.5, 64: 0.5}, references_from(BASE, {1: 0.5, 64: 0.5}) or {})
    assert scorer.score(BASE) == pytest.approx(1.0)
    # +10 % at C=1 is worth exactly as much as +10 % at C=64, although 20 tok/s ≪ 180 tok/s.
    faster_c1 = {1: {"per_request_tok_s_mean": 220.0}, 64: {"aggregate_tok_s": 1800.0}}
    faster_c64 = {1: {"per_request_tok_s_mean": 200.0}, 64: {"aggregate_tok_s": 1980.0}}
    assert scorer.score(faster_c1) == pytest.approx(scorer.score(faster_c64)) == pytest.approx(1.05)


def test_weights_are_normalised_and_zero_weights_ignored() -> None:
    refs = {1: 200.0, 64: 1800.0}
    assert Scorer({1: 7, 64: 3}, refs).score(BASE) == pytest.approx(1.0)
    only_c1 = Scorer({1: 1.0, 64: 0.0}, refs)
    assert only_c1.score({1: {"per_request_tok_s_mean": 300.0}}) == pytest.approx(1.5)


def test_missing_weighted_phase_has_no_score_but_an_optimistic_bound() -> None:
    scorer = Scorer({1: 0.5, 64: 0.5}, {1: 200.0, 64: 1800.0})
    partial = {1: {"per_request_tok_s_mean": 100.0}}
    assert scorer.score(partial) is None
    assert scorer.optimistic_score(partial, {64: 1800.0 * 1.15}) == pytest.approx(0.25 + 0.575)


def test_references_need_positive_values() -> None:
    assert references_from({1: {"per_request_tok_s_mean": 0.0}}, {1: 1.0}) is None
    assert references_from({1: {"per_request_tok_s_mean": None}}, {1: 1.0}) is None


@pytest.mark.parametrize(("op", "value", "expected"),
                         [("<=", 0.02, 0.01), ("<=", 0.005, -0.005), ("<", 0.01, 1e-9),
                          (">=", 2.0, 1.0), (">", 5.0, -2.0)])
def test_violation_sign_convention(op: str, value: float, expected: float) -> None:
    bound = 0.01 if "<" in op else 3.0
    c = ConstraintSpec(text="x", metric="error_rate", op=op, bound=bound)  # type: ignore[arg-type]
    assert violation(c, value) == pytest.approx(expected)


def test_constraints_use_the_worst_phase_and_ignore_unmeasured() -> None:
    any_phase = ConstraintSpec("error_rate <= 0.01", "error_rate", "<=", 0.01)
    c64_only = ConstraintSpec("c64.ttft_p99_ms < 2000", "ttft_p99_ms", "<", 2000.0, phase=64)
    metrics = {1: {"error_rate": 0.0, "ttft_p99_ms": 5000.0}, 64: {"error_rate": 0.05}}
    values = constraint_values((any_phase, c64_only), metrics)
    assert values["error_rate <= 0.01"] == pytest.approx(0.04)
    assert values["c64.ttft_p99_ms < 2000"] == 0.0  # C=64 reported no TTFT: not judged
    assert not is_feasible(values)
