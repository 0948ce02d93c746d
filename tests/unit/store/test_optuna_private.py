"""Each piece of Optuna's private API spectune uses (tuner/store/optuna_private.py) against the
installed Optuna.

An Optuna release that moved or renamed one fails here, naming it, instead of somewhere inside a
study."""

from __future__ import annotations

import warnings

import optuna
import pytest
from optuna.storages import RDBStorage
from optuna.storages._cached_storage import _CachedStorage
from optuna.trial import TrialState

from tuner.store.optuna_private import (
    RDB_PRIVATE_CALLS,
    backend_of,
    has_heartbeat,
    queued_params,
    replace_waiting_pop,
    retried_from,
    storage_of,
    study_id_of,
    trial_id_of,
    was_queued,
    with_system_attrs,
)


@pytest.fixture
def study(tmp_path) -> optuna.Study:  # type: ignore[no-untyped-def]
    # Heartbeats outside Study.optimize and the experimental retry callback: as
    # tuner/store/storage.py uses them.
    warnings.filterwarnings("ignore", category=UserWarning, message="Heartbeat")
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    storage = RDBStorage(f"sqlite:///{tmp_path / 'o.db'}", heartbeat_interval=60, grace_period=120)
    return optuna.create_study(storage=storage)


@pytest.mark.parametrize("name", RDB_PRIVATE_CALLS)
def test_the_rdb_storage_still_has_the_private_calls_we_retry(name: str) -> None:
    assert callable(getattr(RDBStorage, name, None)), f"optuna.storages.RDBStorage.{name} moved"


def test_the_study_reaches_its_storage_ids_and_the_storage_beneath_the_cache(
        study: optuna.Study) -> None:
    assert isinstance(storage_of(study), _CachedStorage)
    assert isinstance(backend_of(study), RDBStorage)
    trial = study.ask()
    frozen = study.trials[0]
    assert trial_id_of(frozen) == trial._trial_id
    assert storage_of(study).get_trial(trial_id_of(frozen)).number == 0
    assert storage_of(study).get_study_name_from_id(study_id_of(study)) == study.study_name


def test_a_queued_trial_carries_its_parameters_until_asked(study: optuna.Study) -> None:
    study.enqueue_trial({"x": 2.0})
    waiting = study.get_trials(states=(TrialState.WAITING,))[0]
    assert was_queued(waiting) and queued_params(waiting) == {"x": 2.0}
    asked = study.ask()
    asked.suggest_float("x", 0, 4)
    study.tell(asked, 1.0)
    assert not was_queued(optuna.trial.create_trial(params={}, distributions={}, value=1.0))


def test_ask_takes_the_queued_trial_the_replacement_chooses(study: optuna.Study) -> None:
    study.enqueue_trial({"x": 1.0})
    study.enqueue_trial({"x": 3.0})
    storage = storage_of(study)

    def newest_first() -> int | None:
        waiting = storage.get_all_trials(study_id_of(study), states=(TrialState.WAITING,))
        chosen = trial_id_of(waiting[-1])
        storage.set_trial_state_values(chosen, state=TrialState.RUNNING)
        return chosen

    replace_waiting_pop(study, newest_first)
    assert study.ask().suggest_float("x", 0, 4) == 3.0


def test_the_retry_callback_marks_its_history_and_the_heartbeat_table_is_read(
        study: optuna.Study) -> None:
    trial = study.ask()
    backend = backend_of(study)
    assert isinstance(backend, RDBStorage)
    backend.record_heartbeat(trial._trial_id)
    session = backend.scoped_session()
    try:
        assert has_heartbeat(session, trial._trial_id)
    finally:
        session.close()
    study.tell(trial, state=TrialState.FAIL)
    optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)(study, study.trials[0])
    assert retried_from(study.trials[-1]) == (0,)


def test_a_shown_copy_carries_other_system_attrs_and_the_stored_trial_keeps_its_own(
        study: optuna.Study) -> None:
    study.enqueue_trial({"x": 1.0})
    stored = study.trials[0]
    shown = with_system_attrs(stored, {"constraints": [0.5]})
    assert shown.system_attrs == {"constraints": [0.5]}
    assert was_queued(stored)
