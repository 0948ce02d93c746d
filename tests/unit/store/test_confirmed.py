"""The confirmation stage as stored on the study: one typed record written and read back."""

from __future__ import annotations

from tuner.store.confirmed import ConfirmationStage, StageEntry, confirmations

PHASES = {1: {"per_request_tok_s_mean": 150.0}, 64: {"aggregate_tok_s": 1900.0}}


def _measured() -> ConfirmationStage:
    stage = ConfirmationStage.begin([5, 0], baseline=0, repeats=2)
    stage = stage.with_run(5, PHASES).with_run(0, PHASES).with_run(5, None)
    return stage


def test_the_stage_is_stored_in_its_json_form_and_read_back_whole() -> None:
    stage = _measured()
    stored = stage.to_stored()
    assert stored == {"baseline": 0, "order": [5, 0], "repeats": 2, "complete": False,
                      "trials": {"5": {"runs": [{"1": PHASES[1], "64": PHASES[64]}], "failed": 1},
                                 "0": {"runs": [{"1": PHASES[1], "64": PHASES[64]}],
                                       "failed": 0}}}
    assert ConfirmationStage.from_stored(stored) == stage
    confirmed = confirmations(stored)
    assert confirmed[5].failed == 1 and confirmed[5].runs == (PHASES,)
    # each configuration's runs pair with the baseline's
    assert confirmed[5].reference == confirmed[0].runs == (PHASES,)


def test_a_stage_is_done_only_when_complete_for_the_same_plan() -> None:
    stage = _measured()
    assert not stage.is_done([5, 0], 2)
    complete = ConfirmationStage.from_stored({**stage.to_stored(), "complete": True})
    assert complete is not None and complete.is_done([5, 0], 2)
    assert not complete.is_done([0, 5], 2) and not complete.is_done([5, 0], 3)


def test_a_new_stage_keeps_the_runs_of_trials_it_did_not_measure_again() -> None:
    earlier = ConfirmationStage(order=(3, 5, 0), repeats=1, baseline=0, complete=True,
                                trials={3: StageEntry(({"1": {"x": 1.0}},)),
                                        5: StageEntry((), failed=1), 0: StageEntry()})
    kept = _measured().keeping(earlier)
    assert list(kept.trials) == [3, 5, 0]
    assert kept.trials[3] == earlier.trials[3]
    assert kept.trials[5] == _measured().trials[5]  # measured now: the new runs


def test_an_older_list_form_or_nothing_stored_is_no_stage() -> None:
    assert ConfirmationStage.from_stored([{"trial": 1}]) is None
    assert ConfirmationStage.from_stored(None) is None
    assert confirmations([{"trial": 1}]) == {}
