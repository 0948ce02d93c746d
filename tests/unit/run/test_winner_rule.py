"""The winner rule (tuner/run/confirm.py): best lower bound, only if above the baseline's upper
bound."""

from __future__ import annotations

from objectives.confidence import Interval
from tuner.run.confirm import choose_winner, runs_planned

BASE = 0


def test_the_best_lower_bound_wins_when_it_clears_the_baseline() -> None:
    verdict = choose_winner({BASE: Interval(0.95, 1.05), 3: Interval(1.20, 1.30),
                             5: Interval(1.10, 1.40), 7: Interval(1.00, 1.08)}, BASE)
    assert verdict is not None
    assert (verdict.winner, verdict.best, verdict.significant) == (3, 3, True)
    # trial 5's interval overlaps the winner's: a tie, said so; trial 7's does not
    assert verdict.ties == (5,)
    assert "tie with trial 5" in verdict.explain()


def test_no_significant_improvement_keeps_the_baseline() -> None:
    verdict = choose_winner({BASE: Interval(0.95, 1.05), 3: Interval(1.04, 1.30)}, BASE)
    assert verdict is not None
    assert (verdict.winner, verdict.best, verdict.significant) == (BASE, 3, False)
    assert verdict.explain().startswith("no significant improvement over the baseline")


def test_a_higher_mean_with_a_lower_bound_below_loses() -> None:
    # 9's mean (1.30) is higher, but its interval is wide: 4's lower bound is the better guarantee
    verdict = choose_winner({BASE: Interval(0.9, 1.0), 4: Interval(1.15, 1.25),
                             9: Interval(1.05, 1.55)}, BASE)
    assert verdict is not None and verdict.winner == 4 and verdict.ties == (9,)


def test_equal_lower_bounds_go_to_the_earlier_trial() -> None:
    verdict = choose_winner({BASE: Interval(0.9, 1.0), 8: Interval(1.1, 1.2),
                             2: Interval(1.1, 1.3)}, BASE)
    assert verdict is not None and verdict.winner == 2


def test_without_a_baseline_the_best_lower_bound_wins() -> None:
    verdict = choose_winner({3: Interval(1.0, 1.2), 4: Interval(0.5, 0.7)}, None)
    assert verdict is not None \
           and (verdict.winner, verdict.significant, verdict.ties) == (3, True, ())


def test_nothing_to_decide_with_only_the_baseline() -> None:
    assert choose_winner({BASE: Interval(0.9, 1.1)}, BASE) is None
    assert choose_winner({}, None) is None


def test_the_stage_costs_k_plus_one_times_r_restarts() -> None:
    assert runs_planned(3, 2) == 8
    assert runs_planned(0, 2) == 0
