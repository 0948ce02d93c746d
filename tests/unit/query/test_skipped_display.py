"""A trial whose C=64 phase was skipped has one meaning wherever it is shown: skipped, with no
score."""

from __future__ import annotations

from optuna.trial import TrialState

from tuner.app.progress import summary_line
from tuner.store.keys import Key
from tuner.store.record import Outcome, TrialRecord, skipped_text

SKIPPED = {Key.OUTCOME: "measured", Key.COUNTS: True, Key.SCORE: 0.97, Key.SKIPPED_PHASES: [64],
           Key.SKIP: {"bounds": {"64": 2000.0}, "optimistic_score": 0.97, "incumbent_score": 1.2},
           Key.PHASES: {"1": {"per_request_tok_s_mean": 120.0,
                              "per_request_tok_s_mean_ci": [110.0, 130.0]}}}


def test_the_live_line_never_shows_the_optimistic_bound_as_a_score() -> None:
    record = TrialRecord.from_attrs(5, TrialState.COMPLETE, SKIPPED, {})
    assert record.outcome is Outcome.MEASURED and record.shown_score is None
    line = summary_line(record)
    assert "score" not in line and "0.97" not in line
    assert skipped_text([64]) in line \
           and skipped_text([64]) == "skipped C=64 (could not beat the best)"
    assert "C=1 120.0 [110.0, 130.0] tok/s" in line


def test_a_measured_line_shows_the_score_interval() -> None:
    attrs = {**SKIPPED, Key.SKIPPED_PHASES: [], Key.SKIP: None, Key.SCORE: 1.083,
             Key.SCORE_CI: [1.02, 1.146]}
    line = summary_line(TrialRecord.from_attrs(7, TrialState.COMPLETE, attrs, {}))
    assert "score 1.083 [1.020, 1.146]" in line


def test_the_dashboard_shows_a_skipped_trial_as_pruned_without_its_bound() -> None:
    import optuna

    from tuner.query.dashboard import STATUS_ATTR, as_shown

    trial = optuna.trial.create_trial(value=0.97, user_attrs=SKIPPED)
    shown = as_shown(trial)
    assert shown.state == TrialState.PRUNED and shown.values is None
    assert shown.user_attrs[STATUS_ATTR] == "skipped C=64 (could not beat the best)"
    # the stored trial is untouched
    assert trial.state == TrialState.COMPLETE and trial.value == 0.97
