"""Every use spectune makes of Optuna's private API, in one place.

Optuna is pinned below 6, and what is reached here is private: a release may move or rename it
without notice. tests/unit/store/test_optuna_private.py checks each name against the installed
Optuna, so an upgrade that moved one fails there, loudly and by name, instead of somewhere in a
study. Why each is needed:

- the storage and ids behind a ``Study``/``FrozenTrial``: the baseline-first queue and the resilient
  storage talk to the storage by trial id, which Optuna only exposes privately;
- ``Study._pop_waiting_trial_id``: which queued trial ``ask`` takes (tuner/search/baseline.py);
- ``_CachedStorage._backend``: the storage Optuna wraps every RDB storage in, to reach ours beneath
  it;
- the RDB storage's private calls (what the cache calls instead of the public ones) and its
  heartbeat table: retried and read by tuner/store/resilient.py;
- the system attrs ``fixed_params`` (a queued trial's parameters) and ``retry_history`` (the
  stale-trial callback's mark), and ``FrozenTrial._system_attrs`` (the dashboard's copy of a trial).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial

#: What Optuna's cache in front of every RDB storage calls instead of the public methods, and the
#: stale-trial query the heartbeat uses: the resilient storage retries them like the public ones.
RDB_PRIVATE_CALLS: tuple[str, ...] = ("_set_trial_param", "_get_best_trial_id", "_get_trials",
                                      "_get_stale_trial_ids", "_create_new_trial")
#: A queued (``enqueue_trial``) trial's parameters, before its objective asked for them.
QUEUED_PARAMS = "fixed_params"
#: The trial numbers a retry (``RetryHeartbeatStaleTrialCallback``) descends from.
RETRY_HISTORY = "retry_history"


def storage_of(study: optuna.Study) -> BaseStorage:
    return study._storage


def study_id_of(study: optuna.Study) -> int:
    return study._study_id


def trial_id_of(trial: FrozenTrial) -> int:
    return trial._trial_id


def backend_of(study: optuna.Study) -> BaseStorage:
    """The storage beneath Optuna's cache (the study's own storage where there is no cache)."""
    storage = study._storage
    return getattr(storage, "_backend", storage)


def replace_waiting_pop(study: optuna.Study, pop: Callable[[], int | None]) -> None:
    """Let ``pop`` choose which queued trial this study instance's ``ask`` takes (and mark it
    RUNNING)."""
    study._pop_waiting_trial_id = pop  # type: ignore[method-assign]


def queued_params(trial: FrozenTrial) -> dict[str, Any] | None:
    """The parameters ``trial`` was queued with, or None when it was not queued."""
    params = trial.system_attrs.get(QUEUED_PARAMS)
    return dict(params) if params is not None else None


def was_queued(trial: FrozenTrial) -> bool:
    return QUEUED_PARAMS in trial.system_attrs


def retried_from(trial: FrozenTrial) -> tuple[int, ...]:
    return tuple(trial.system_attrs.get(RETRY_HISTORY, ()))


def with_system_attrs(trial: FrozenTrial, attrs: Mapping[str, Any]) -> FrozenTrial:
    """A copy of ``trial`` showing ``attrs`` as its system attrs (the stored trial is unchanged)."""
    shown = copy.copy(trial)
    shown._system_attrs = dict(attrs)
    return shown


def has_heartbeat(session: Any, trial_id: int) -> bool:
    """Whether the RDB storage holds a heartbeat row for the trial (``session``: one of its
    SQLAlchemy sessions)."""
    from optuna.storages._rdb import models

    return models.TrialHeartbeatModel.where_trial_id(trial_id, session) is not None
