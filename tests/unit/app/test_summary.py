"""The end of `spectune tune`: by how much the confirmed winner beats the baseline, and how to apply
it."""

from __future__ import annotations

from optuna.trial import TrialState

from objectives.confidence import Interval
from tuner.app.summary import best_lines
from tuner.run.confirm import choose_winner
from tuner.store.keys import Key
from tuner.store.record import TrialRecord


def _record(number: int) -> TrialRecord:
    return TrialRecord.from_attrs(number, TrialState.COMPLETE,
                                  {Key.BASELINE: number == 0, Key.SCORE: 1.0}, {})


def test_a_significant_winner_says_its_gain_with_its_interval_and_how_to_apply_it() -> None:
    # paired with the baseline's fresh runs: the baseline's confirmed score is exact
    verdict = choose_winner({0: Interval(1.02, 1.02), 4: Interval(1.05, 1.07)}, baseline=0)
    assert verdict is not None and verdict.significant
    lines = best_lines(_record(4), _record(0), verdict, "studies/simulated.toml")
    assert lines[0].startswith("best: trial 4, confirmed score 1.060 [1.050, 1.070]")
    assert lines[1].startswith("improvement: +3.9% [+2.9%, +4.9%] over the baseline")
    assert "`spectune deploy studies/simulated.toml --best`" in lines[1]
    # no significant gain: nothing claimed
    flat = choose_winner({0: Interval(1.0, 1.0), 4: Interval(0.99, 1.01)}, baseline=0)
    assert flat is not None
    assert not any(line.startswith("improvement")
                   for line in best_lines(_record(0), _record(0), flat))
