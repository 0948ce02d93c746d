"""A storage that rides out outages: every call to the database is retried with backoff where it is
made.

Retrying around ``study.optimize`` is too late: by then Optuna has turned the storage error into
something else (``UnboundLocalError ... updated_state`` when telling a trial's state failed,
``AssertionError: Should not reach.`` when reading it back failed too) and left the trial RUNNING.
So ``ResilientRDBStorage`` retries each storage method itself — a PostgreSQL restart or a SQLite
file briefly unreadable is invisible — and once the retry window is spent it marks itself *down* and
raises ``StorageUnavailable`` from every later call at once, so whatever Optuna makes of the error,
the study loop finds the one-line reason in ``failure`` (exit 4).

It also closes two holes of Optuna's heartbeat (PostgreSQL): a trial is RUNNING from the moment
``ask`` creates it, but its first heartbeat is written only when the objective starts, seconds later
with GPSampler — a worker killed in between left a trial no stale check would ever fail. Here the
heartbeat is written at once after the trial turns RUNNING, and a RUNNING trial that has no
heartbeat at all is stale once it is older than the grace period.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import optuna
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from tuner.core.errors import chain_of
from tuner.core.faults import fault_point
from tuner.store.optuna_private import RDB_PRIVATE_CALLS, backend_of, has_heartbeat, trial_id_of

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Pauses between attempts of one storage call (docs/study.md): about 80 s in all before giving up.
BACKOFF_S: tuple[float, ...] = (1.0, 4.0, 16.0, 60.0)

# Every method of Optuna's storage interface that talks to the database.
_RETRIED = ("check_trial_is_updatable", "create_new_study", "create_new_trial", "delete_study",
            "get_all_studies",
            "get_all_trials", "get_best_trial", "get_n_trials", "get_study_directions",
            "get_study_id_from_name",
            "get_study_name_from_id", "get_study_system_attrs", "get_study_user_attrs", "get_trial",
            "get_trial_id_from_study_id_trial_number", "get_trial_number_from_id",
            "get_trial_param", "get_trial_params", "get_trial_system_attrs", "get_trial_user_attrs",
            "set_study_system_attr",
            "set_study_user_attr", "set_trial_intermediate_value", "set_trial_param",
            "set_trial_state_values",
            "set_trial_system_attr", "set_trial_user_attr", *RDB_PRIVATE_CALLS)


def backoff() -> tuple[float, ...]:
    """The pauses between attempts; ``SPECTUNE_STORAGE_BACKOFF`` (seconds, comma-separated) shortens
    them for the fault suite, which must see the end of the window without waiting 80 s per case."""
    text = os.environ.get("SPECTUNE_STORAGE_BACKOFF")
    if not text:
        return BACKOFF_S
    return tuple(float(part) for part in text.split(","))


class DatabaseFileChanged(Exception):
    """The SQLite file is no longer the one the study was opened on: deleted, or replaced by another
    file.

    Checked before every call, because SQLite would not notice: an open connection goes on writing
    to the deleted file (lost when the tuner exits), and a new one creates an empty database at the
    path."""


def transient_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean "the database is not answering right now", not "this request is wrong": a
    lost connection, a locked/read-only/full/unreadable file, a SQLite file deleted or replaced.
    Optuna wraps some in ``StorageInternalError``."""
    from sqlalchemy.exc import DatabaseError, InterfaceError, OperationalError

    return (OperationalError, InterfaceError, DatabaseError, optuna.exceptions.StorageInternalError,
            DatabaseFileChanged)


def cause_of(exc: BaseException) -> BaseException:
    """The database's own error behind Optuna's ``StorageInternalError`` (which says only "An
    exception is raised during the commit ... e.g. exceeding max length" for a full disk or a
    read-only directory)."""
    chain = chain_of(exc)
    return next((e for e in chain if not isinstance(e, optuna.exceptions.StorageInternalError)),
                chain[-1])


#: What a database server says when it refuses the connection itself — a wrong password, an unknown
#: user or database (PostgreSQL, MySQL). The driver reports these as OperationalError, like a
#: dropped connection, and without an SQLSTATE; but no wait changes the answer, so they are not
#: retried.
REFUSALS_FOR_GOOD = ("password authentication failed", "no password supplied",
                     "authentication failed for user",
                     "does not exist", "access denied for user", "unknown database")


def refused_for_good(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is the server refusing this connection for a reason time
    won't fix."""
    # SQLAlchemy's message quotes the driver's (and raises from it): the chain's text holds the
    # server's words.
    text = " ".join(str(e) for e in chain_of(exc)).lower()
    return any(marker in text for marker in REFUSALS_FOR_GOOD)


def _not_transient(exc: BaseException) -> bool:
    from sqlalchemy.exc import DataError, IntegrityError, ProgrammingError

    # DatabaseError's other subclasses are answers about the request itself; retrying cannot change
    # them.
    return isinstance(exc, (IntegrityError, ProgrammingError, DataError)) or refused_for_good(exc)


class ResilientRDBStorage(RDBStorage):
    """``RDBStorage`` whose calls are retried with backoff, and whose heartbeat starts with the
    trial."""

    def __init__(self, url: str, *, describe: Callable[[BaseException], Exception], label: str = "",
                 sqlite_file: Path | None = None, **kwargs: Any) -> None:
        #: Builds the error raised once the window is spent (``StorageUnavailable``, with the URL
        #: redacted).
        self._describe = describe
        self._label = label or "the storage"  # the URL without a password, for the retry warnings
        self._local = threading.local()
        #: Set once the storage is given up on: every later call fails at once with it.
        self.failure: Exception | None = None
        super().__init__(url, **kwargs)
        self._file = sqlite_file
        self._identity = _identity(sqlite_file) if sqlite_file is not None else None

    def _call(self, name: str, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # a storage method calling another: the outer one retries
        if getattr(self._local, "depth", 0):
            return method(*args, **kwargs)
        if self.failure is not None:
            raise self.failure
        pauses = backoff()
        self._local.depth = 1
        try:
            for attempt in range(len(pauses) + 1):
                try:
                    self._check_file()
                    return method(*args, **kwargs)
                except transient_errors() as error:
                    if _not_transient(error):
                        raise
                    exc = cause_of(error)
                    if attempt == len(pauses):
                        self.failure = self._describe(exc)
                        raise self.failure from None
                    # Said, not logged quietly: a tuner waiting out an outage must not look hung.
                    log.warning("storage %s failed (%s); trying again in %g s (attempt %d of %d)",
                                self._label,
                                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                                pauses[attempt], attempt + 2, len(pauses) + 1)
                    self._reset_connections()
                    time.sleep(pauses[attempt])
        finally:
            self._local.depth = 0
        raise AssertionError("unreachable")

    def _check_file(self) -> None:
        if self._file is not None and _identity(self._file) != self._identity:
            state = "deleted" if not self._file.exists() else "replaced by another file"
            raise DatabaseFileChanged(f"the database file {self._file} was {state}")

    def _reset_connections(self) -> None:
        # A connection to a restarted server, or to a SQLite file that was replaced, is useless:
        # start afresh.
        try:
            self.scoped_session.remove()
            self.engine.dispose()
        except Exception:
            log.debug("could not reset the storage's connections", exc_info=True)

    # ----- the heartbeat from the first moment ----------------------------------------------------
    def _create_new_trial(self, study_id: int, template_trial: Any = None) -> Any:
        # Optuna's cache calls this one; the public create_new_trial goes through it too.
        trial = self._call("_create_new_trial", super()._create_new_trial, study_id, template_trial)
        if trial.state == TrialState.RUNNING:
            self._started(trial_id_of(trial))
        return trial

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Any = None) -> bool:
        if state.is_finished():
            # Optuna storing a trial's end: the objective has returned, the trial is RUNNING
            fault_point("tell")
        updated = self._call("set_trial_state_values", super().set_trial_state_values, trial_id,
                             state, values)
        if updated and state == TrialState.RUNNING:  # a queued trial taken by ``ask``
            self._started(trial_id)
        return updated

    def _started(self, trial_id: int) -> None:
        self.asked.append(trial_id)
        fault_point("after_ask")
        if self.heartbeat_interval is not None:
            self.record_heartbeat(trial_id)

    @property
    def asked(self) -> list[int]:
        """Trials this process turned RUNNING, in order: an interrupt fails the ones still
        RUNNING."""
        if not hasattr(self, "_asked"):
            self._asked: list[int] = []
        return self._asked

    def record_heartbeat(self, trial_id: int) -> None:
        # Runs on Optuna's heartbeat thread too, where an exception would print a traceback and end
        # the thread: a missed beat is harmless (the grace period is several intervals), a crashed
        # thread is not.
        try:
            self._call("record_heartbeat", super().record_heartbeat, trial_id)
        except Exception as exc:
            log.info("could not record the heartbeat of trial id %d: %s", trial_id, exc)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        stale = self._call("_get_stale_trial_ids", super()._get_stale_trial_ids, study_id)
        grace = self.grace_period or 2 * (self.heartbeat_interval or 0)
        cutoff = datetime.datetime.now() - datetime.timedelta(seconds=grace)
        for trial in self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,)):
            if (trial_id_of(trial) in stale or trial.datetime_start is None
                or trial.datetime_start > cutoff):
                continue
            if not self._has_heartbeat(trial_id_of(trial)):
                stale.append(trial_id_of(trial))
        return stale

    def _has_heartbeat(self, trial_id: int) -> bool:
        def look() -> bool:
            session = self.scoped_session()
            try:
                return has_heartbeat(session, trial_id)
            finally:
                session.close()

        return self._call("has_heartbeat", look)


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` is now (device and inode); None when there is none."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _retrying(name: str) -> Callable[..., Any]:
    base = getattr(RDBStorage, name)

    def method(self: ResilientRDBStorage, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, base.__get__(self), *args, **kwargs)

    method.__name__ = name
    method.__doc__ = base.__doc__
    return method


for _name in _RETRIED:
    if _name not in ResilientRDBStorage.__dict__:
        setattr(ResilientRDBStorage, _name, _retrying(_name))


def storage_failure(study: optuna.Study) -> Exception | None:
    """Why ``study``'s storage was given up on, or None (also for storages that are not ours)."""
    backend = backend_of(study)
    return backend.failure if isinstance(backend, ResilientRDBStorage) else None


def asked_trials(study: optuna.Study) -> list[int]:
    """Ids of the trials this process turned RUNNING (empty for storages that are not ours)."""
    backend = backend_of(study)
    return list(backend.asked) if isinstance(backend, ResilientRDBStorage) else []
