"""The typed record of a stored trial, read from real Optuna trials: what each kind of trial is for
the study."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from objectives.scoring import STARTED_KEY, VALID_KEY
from tests.unit.run.test_trial import run_steps, setup  # noqa: F401 - fixture
from tuner.run.trial import TrialRunner
from tuner.run.trial_events import TrialEvents
from tuner.store.keys import Key
from tuner.store.record import Outcome, TrialRecord, best_record, measured_records, records


def record(study: optuna.Study, number: int) -> TrialRecord:
    return TrialRecord.from_stored(study.trials[number])


def kinds(r: TrialRecord) -> tuple[Outcome | None, bool, bool, bool]:
    return r.outcome, r.is_measured, r.is_scored, r.is_candidate


def test_a_measured_trial_is_a_candidate_with_typed_fields(setup: tuple) -> None:  # noqa: F811
    study, runner, _, _ = setup
    study.optimize(runner, n_trials=1)
    r = record(study, 0)
    assert kinds(r) == (Outcome.MEASURED, True, True, True)
    assert r.state == TrialState.COMPLETE and r.counts and r.feasible and r.baseline
    assert r.score == pytest.approx(1.0)
    assert r.config is not None and r.config.get("--speculative-num-steps") == 3
    assert r.effective is not None and r.effective["speculative_num_draft_tokens"] == 4
    assert r.config_key is not None and '"effective"' in r.config_key  # keyed by what SGLang runs
    assert set(r.metrics) == {1, 64} and r.metrics[64]["aggregate_tok_s"] == 2000.0
    assert r.params_decoded == {"--speculative-num-steps": 3, "--speculative-eagle-topk": 1}
    assert r.skipped_phases == () and r.skip is None and r.skip_bounds == {}
    assert r.launch == "x" and r.timings["ready_s"] == 0.2 and "benchmark_s" in r.timings
    assert r.values == (pytest.approx(1.0),) and r.duration_s is not None and r.duration_s >= 0
    # Stored as plain JSON values, as before the record existed: old databases and new ones read
    # alike.
    stored = study.trials[0].user_attrs
    assert type(stored[Key.OUTCOME]) is str and stored[Key.OUTCOME] == "measured"
    assert stored[Key.COUNTS] is True and stored[Key.PHASES]["1"]["per_request_tok_s_mean"] == 220.0


def test_a_duplicate_copies_the_result_but_is_free(setup: tuple) -> None:  # noqa: F811
    study, runner, _, _ = setup
    study.optimize(runner, n_trials=1)
    run_steps(study, runner, 3)
    r = record(study, 1)
    assert kinds(r) == (Outcome.DUPLICATE, False, False, False)
    assert r.duplicate_of == 0 and r.metrics == record(study, 0).metrics and r.feasible
    assert [m.number for m in measured_records(study)] == [0]


def test_a_failed_start_counts_but_is_infeasible(setup: tuple) -> None:  # noqa: F811
    study, runner, _, _ = setup
    study.optimize(runner, n_trials=1)
    run_steps(study, runner, 6)
    r = record(study, 1)
    assert kinds(r) == (Outcome.DEPLOY_FAILED, True, False, False)
    assert not r.feasible and r.constraints[STARTED_KEY] == 1.0
    assert r.failure_class == "out-of-memory" and r.failure and "OOM" in (r.log_tail or "")
    assert r.score is None and r.metrics == {}


def test_a_constraint_violation_is_measured_but_no_candidate(setup: tuple) -> None:  # noqa: F811
    study, runner, _, _ = setup
    study.optimize(runner, n_trials=1)
    run_steps(study, runner, 5)
    r = record(study, 1)
    assert kinds(r) == (Outcome.MEASURED, True, False, False)
    assert r.score is not None and not r.feasible


def test_a_skipped_trial_is_scored_at_its_bound_but_no_candidate(
        setup: tuple) -> None:  # noqa: F811
    study, runner, _, _ = setup
    study.optimize(runner, n_trials=1)
    run_steps(study, runner, 4, 2, 1)
    r = record(study, 3)
    assert kinds(r) == (Outcome.MEASURED, True, True, False)
    assert r.skipped_phases == (64,) and set(r.metrics) == {1}
    assert r.skip_bounds == {64: pytest.approx(2000.0 * 1.15)}
    assert r.score == pytest.approx(r.skip["optimistic_score"] if r.skip else None)
    best = best_record(study)
    assert best is not None and best.number == 1  # steps=4


def test_the_live_view_gets_the_record_the_trial_ends_with(setup: tuple) -> None:  # noqa: F811
    study, runner, measurer, space = setup
    seen: list[TrialRecord] = []
    watched = TrialRunner(runner.spec, space, measurer, TrialEvents(on_done=seen.append))
    study.optimize(watched, n_trials=1)
    run_steps(study, watched, 3, 6)
    assert [r.outcome for r in seen] == [Outcome.MEASURED, Outcome.DUPLICATE, Outcome.DEPLOY_FAILED]
    for live, stored in zip(seen, records(study), strict=True):
        assert kinds(live) == kinds(stored)
        assert (live.number, live.state, live.score, live.metrics) == (stored.number, stored.state,
                                                                       stored.score, stored.metrics)


def _stored(state: TrialState, attrs: dict[str, object],
            constraints: dict[str, float] | None = None) -> TrialRecord:
    study = optuna.create_study(direction="maximize")
    study.add_trial(optuna.trial.create_trial(state=state, value=1.0 if state == TrialState.COMPLETE
                                              else None, user_attrs=attrs, constraints=constraints))
    return TrialRecord.from_stored(study.trials[0])


def test_rejected_taken_and_interrupted_trials_never_count() -> None:
    rejected = _stored(TrialState.COMPLETE,
                       {Key.OUTCOME: "rejected", Key.COUNTS: False, Key.REASON: "no draft"},
                       {VALID_KEY: 1.0, STARTED_KEY: 0.0})
    assert kinds(rejected) == (Outcome.REJECTED, False, False, False)
    assert rejected.reason == "no draft" and not rejected.feasible
    taken = _stored(TrialState.FAIL, {Key.OUTCOME: "taken", Key.COUNTS: False, Key.TAKEN_BY: 4})
    assert kinds(taken) == (Outcome.TAKEN, False, False, False) and taken.taken_by == 4
    interrupted = _stored(TrialState.FAIL, {Key.CONFIG_KEY: "k", Key.HOST: "box-a"})
    assert kinds(interrupted) == (Outcome.INTERRUPTED, False, False, False)
    assert interrupted.config_key == "k" and interrupted.host == "box-a"
    # Attributes written just before an interrupt do not make a FAIL trial measured.
    cut_short = _stored(TrialState.FAIL,
                        {Key.OUTCOME: "measured", Key.COUNTS: True, Key.SCORE: 1.2})
    assert kinds(cut_short) == (Outcome.INTERRUPTED, False, False, False)


def test_running_queued_and_unknown_outcomes() -> None:
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial({"x": 1}, user_attrs={Key.RETRY_OF: 0})
    queued = TrialRecord.from_stored(study.trials[0])
    assert kinds(queued) == (Outcome.QUEUED, False, False, False)
    study.ask()
    running = TrialRecord.from_stored(study.trials[0])
    assert kinds(running) == (Outcome.RUNNING, False, False, False)
    told_by_hand = _stored(TrialState.COMPLETE, {Key.OUTCOME: "something new", Key.COUNTS: True})
    assert told_by_hand.outcome is None and told_by_hand.is_measured and not told_by_hand.is_scored
    assert best_record(study) is None and measured_records(study) == []
