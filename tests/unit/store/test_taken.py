"""A configuration RUNNING on another worker counts as taken: the trial gives the point up (FAIL,
free) instead of deploying it a second time; once that trial is COMPLETE the usual duplicate reuse
applies."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from tests.unit.run.test_trial import setup  # noqa: F401 - fixture
from tuner.query.ranking import rank
from tuner.run.trial import TrialRunner
from tuner.run.trial_events import ConfigTaken, TrialEvents
from tuner.store.keys import Key

STEPS4 = {"speculative-num-steps": 4, "speculative-eagle-topk": 1}


def test_running_elsewhere_is_taken_then_reused(setup: tuple) -> None:  # noqa: F811
    study, runner, measurer, space = setup
    study.optimize(runner, n_trials=1)  # the baseline: steps=3
    # Another worker's trial, mid-measurement: RUNNING, its config key stored (as TrialRunner stores
    # it first).
    study.enqueue_trial(STEPS4)
    elsewhere = study.ask()
    elsewhere.set_user_attr(Key.CONFIG_KEY, space.suggest(elsewhere).key)
    proposed: list[int] = []
    mine = TrialRunner(runner.spec, space, measurer,
                       TrialEvents(on_proposed=lambda: proposed.append(1)))
    study.enqueue_trial(STEPS4)
    study.optimize(mine, n_trials=1, catch=(ConfigTaken,))
    taken = study.trials[-1]
    assert taken.state == TrialState.FAIL and taken.user_attrs[Key.OUTCOME] == "taken"
    assert taken.user_attrs["taken_by"] == elsewhere.number \
           and taken.user_attrs[Key.COUNTS] is False
    assert measurer.deployed == [3]  # steps=4 was not deployed a second time
    assert proposed == [1]  # the ask lock is released once the configuration is stored
    view = next(t for t in rank(study, runner.spec).trials if t.number == taken.number)
    assert view.status == "taken" and view.failure is None  # not reported as an interrupted trial

    # The other worker finishes; the same configuration proposed now reuses its result.
    elsewhere.set_user_attr(Key.COUNTS, True)  # what its runner stores when it has measured
    elsewhere.set_user_attr(Key.OUTCOME, "measured")
    study.tell(elsewhere, 1.0)
    study.enqueue_trial(STEPS4)
    study.optimize(mine, n_trials=1)
    assert study.trials[-1].user_attrs[Key.OUTCOME] == "duplicate"
    assert study.trials[-1].user_attrs["duplicate_of"] == elsewhere.number
    assert measurer.deployed == [3]


def test_a_lone_tuner_never_takes_its_own_trial(setup: tuple) -> None:  # noqa: F811
    study, runner, measurer, _ = setup
    study.enqueue_trial(STEPS4)
    study.optimize(runner, n_trials=2)
    assert [t.user_attrs[Key.OUTCOME] for t in study.trials] == ["measured", "measured"]
    assert measurer.deployed == [3, 4]
    assert all(t.state == TrialState.COMPLETE for t in study.trials)
    assert isinstance(study, optuna.Study)
