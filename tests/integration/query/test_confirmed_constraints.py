"""An extra ``--constraint`` on a confirmed trial is judged on its confirmed figures (the fresh runs
pooled), not on the study's single measurement; and when the baseline drops out under it, the
winner rule says why."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from objectives.scoring import figure
from tuner.cli import main
from tuner.query.load import open_stored_study
from tuner.query.options import parse_constraints
from tuner.query.ranking import TrialView, rank

METRIC = "aggregate_tok_s"
PHASE = 64


def _study_and_confirmed(view: TrialView) -> tuple[float, float]:
    assert view.record.confirmed is not None
    study = figure(view.metrics[PHASE], METRIC)
    confirmed = figure(view.record.confirmed.pooled[PHASE], METRIC)
    assert study is not None and confirmed is not None and study != confirmed
    return study, confirmed


def test_a_confirmed_trial_is_judged_on_its_confirmed_figures(confirmed_study: Path) -> None:
    stored = open_stored_study(confirmed_study)
    confirmed = [t for t in rank(stored.study, stored.spec).trials if t.confirmed_runs]
    assert len(confirmed) >= 2  # the baseline and the top candidate
    for view in confirmed:
        study, fresh = _study_and_confirmed(view)
        # a bound between the two figures: the study's measurement breaks it, the confirmed holds
        op = ">" if fresh > study else "<"
        text = f"c{PHASE}.{METRIC} {op} {(study + fresh) / 2}"
        ranking = rank(stored.study, stored.spec, constraints=parse_constraints((text,), [1, 64]))
        judged = next(t for t in ranking.trials if t.number == view.number)
        assert judged.feasible and not judged.violations, (view.number, text)
        # … and the other way round, the confirmed figures break it
        flipped = text.replace(op, "<" if op == ">" else ">")
        ranking = rank(stored.study, stored.spec,
                       constraints=parse_constraints((flipped,), [1, 64]))
        judged = next(t for t in ranking.trials if t.number == view.number)
        assert not judged.feasible and flipped in judged.violations


def test_an_unconfirmed_trial_is_still_judged_on_its_study_measurement(
        confirmed_study: Path) -> None:
    stored = open_stored_study(confirmed_study)
    views = rank(stored.study, stored.spec).trials
    plain = next(t for t in views if not t.confirmed_runs and t.feasible and t.metrics.get(PHASE))
    value = figure(plain.metrics[PHASE], METRIC)
    assert value is not None
    above = f"c{PHASE}.{METRIC} > {value * 1.001}"
    ranking = rank(stored.study, stored.spec, constraints=parse_constraints((above,), [1, 64]))
    assert not next(t for t in ranking.trials if t.number == plain.number).feasible


def test_best_says_why_the_baseline_does_not_qualify(confirmed_study: Path) -> None:
    """A constraint the baseline's confirmed figures break and the winner's meet: ``best`` names the
    winner and says which constraint the baseline breaks — not that no baseline was confirmed."""
    stored = open_stored_study(confirmed_study)
    views = rank(stored.study, stored.spec).trials
    baseline = next(t for t in views if t.record.baseline and t.confirmed_runs)
    other = next(t for t in views if not t.record.baseline and t.confirmed_runs)
    assert baseline.record.confirmed is not None and other.record.confirmed is not None
    mine = figure(baseline.record.confirmed.pooled[1], "per_request_tok_s_mean")
    theirs = figure(other.record.confirmed.pooled[1], "per_request_tok_s_mean")
    assert mine is not None and theirs is not None and theirs > mine
    text = f"c1.per_request_tok_s_mean > {(mine + theirs) / 2}"
    result = CliRunner().invoke(main, ["best", str(confirmed_study), "--constraint", text,
                                       "--format", "json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["trial"] == other.number
    explanation = answer["confirmed"]["verdict"]["explanation"]
    assert f"the baseline (trial {baseline.number}) breaks {text} on its confirmed figures" \
        in explanation
    assert "no baseline was confirmed" not in explanation
