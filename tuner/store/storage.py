"""Where a study lives: opening Optuna storage, one-writer locking for SQLite, recovery after a
crash.

SQLite is for one tuner process on one machine (reference/optuna-5.0-notes.md §2): we hold an
exclusive lock file beside the database for the whole run, so a RUNNING trial found at start can
only belong to a process that died — it is failed and its parameters re-queued at once.
PostgreSQL/MySQL studies use Optuna's heartbeat instead, which lets other workers reclaim a dead
worker's trial (tuner/app/worker.py), and tuner/workers/leases.py for hosts.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.core.errors import SpectuneError
from tuner.store.keys import Key
from tuner.store.optuna_private import queued_params, retried_from
from tuner.store.resilient import ResilientRDBStorage, backoff, refused_for_good
from tuner.study.branches import OUTSIDE

HEARTBEAT_INTERVAL_S = 60
HEARTBEAT_GRACE_S = 300
STORAGE_RETRIES = 4
#: Opening a study: nothing is running yet, so a few quick attempts (each announced) rather than
#: minutes of backoff; a PostgreSQL server that is down is reported within seconds.
OPEN_RETRIES = 2
#: Seconds one connection attempt to a database server may take (libpq and MySQL drivers:
#: ``connect_timeout``); without it an unreachable host costs the operating system's TCP timeout,
#: minutes, per attempt.
CONNECT_TIMEOUT_S = 5

T = TypeVar("T")


class StorageUnavailable(SpectuneError):
    exit_code = 4


class StudyBusy(SpectuneError):
    exit_code = 5


def redact(text: str) -> str:
    """``text`` (a URL, or a message quoting one) without any password: ``user:***@`` and
    ``password=***``."""
    # Up to the last @ of the word: a password with a raw @ (a mistake SQLAlchemy still parses)
    # stays hidden.
    text = re.sub(r"://([^:/@\s]+):[^\s'\"]*@", r"://\1:***@", text)
    return re.sub(r"([?&]password=)[^&\s'\"]*", r"\1***", text)


def sqlite_path(url: str) -> Path | None:
    if not url.startswith("sqlite"):
        return None
    rest = url.split("://", 1)[1]
    return Path(rest[1:]) if rest.startswith("/") and rest != "/:memory:" else None


def is_server_database(url: str) -> bool:
    """PostgreSQL/MySQL: several workers may share the study (SQLite: one tuner at a time)."""
    return not url.startswith("sqlite")


def make_storage(url: str, *, heartbeat_interval_s: int = HEARTBEAT_INTERVAL_S,
                 heartbeat_grace_s: int = HEARTBEAT_GRACE_S,
                 raise_unreachable: bool = False) -> optuna.storages.BaseStorage:
    """An RDB storage with the settings an overnight study needs. ``raise_unreachable``: let a
    connection failure through as is, for a caller that retries it (``with_storage_retries``)."""
    describe, label, sqlite_file = _outage(url), redact(url), sqlite_path(url)
    if url.startswith("sqlite"):
        try:
            # A generous busy timeout: a dashboard reading the same file must not crash the tuner.
            return ResilientRDBStorage(url, describe=describe, label=label,
                                       sqlite_file=sqlite_file,
                                       engine_kwargs={"connect_args": {"timeout": 30}})
        except Exception as exc:  # sqlalchemy raises many types; all mean "cannot open"
            raise StorageUnavailable(
                f"cannot open storage {label}: {first_line(exc)}") from None
    for attempt in range(3):
        try:
            # the heartbeat is "experimental" since 2.8; a warning per worker is noise
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return ResilientRDBStorage(
                    url, describe=describe, label=label,
                    engine_kwargs={"pool_pre_ping": True,
                                   "connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}},
                    heartbeat_interval=heartbeat_interval_s,
                    grace_period=heartbeat_grace_s,
                    # A dead worker's trial is failed by the next live worker's ask and its
                    # parameters queued again.
                    heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
                        max_retry=3),
                )
        except (_integrity_error(), _programming_error()) as exc:
            # Workers started together on an empty database race to create Optuna's tables; the
            # loser of a CREATE TABLE race sees a unique violation or "already exists", and a second
            # look finds them made.
            if attempt == 2:
                raise StorageUnavailable(
                    f"cannot open storage {label}: {first_line(exc)}") from None
            time.sleep(0.3 * (attempt + 1))
        except _sqlalchemy_error():
            if raise_unreachable:
                raise
            raise_unavailable(url)
        except Exception as exc:  # sqlalchemy raises many types; all mean "cannot open"
            raise StorageUnavailable(
                f"cannot open storage {label}: {first_line(exc)}") from None
    raise AssertionError("unreachable")


def _outage(url: str) -> Callable[[BaseException], Exception]:
    def describe(exc: BaseException) -> Exception:
        return StorageUnavailable(
            f"storage {redact(url)} kept failing for {sum(backoff()):g} s: {first_line(exc)} "
            "(the target is restored; resume with the same command once it "
            "is back)")

    return describe
def raise_unavailable(url: str) -> None:
    """Re-raise the exception being handled as ``StorageUnavailable`` (its first line, redacted)."""
    import sys

    exc = sys.exc_info()[1]
    assert exc is not None
    raise StorageUnavailable(f"cannot open storage {redact(url)}: {first_line(exc)}") from None


def with_storage_retries(action: Callable[[], T], what: str, url: str, *,
                         sleep: Callable[[float], None] = time.sleep,
                         retries: int = STORAGE_RETRIES,
                         say: Callable[[str], None] | None = None) -> T:
    """Run ``action``; on a storage error retry with exponential backoff, then raise
    ``StorageUnavailable``. ``say`` hears each wait and its reason: a retrying tuner must not look
    hung."""
    delay = 1.0
    for attempt in range(retries + 1):
        try:
            return action()
        except (optuna.exceptions.StorageInternalError, _sqlalchemy_error()) as exc:
            if refused_for_good(exc):
                raise StorageUnavailable(
                    f"storage {redact(url)} refused the connection while {what}: "
                    f"{first_line(exc)} (nothing measured was lost)") from None
            if attempt == retries:
                raise StorageUnavailable(
                    f"storage {redact(url)} failed while {what}: {first_line(exc)} "
                    f"(after {retries + 1} attempts; nothing measured was "
                    "lost)") from None
            if say is not None:
                say(f"storage {redact(url)} failed while {what}: {first_line(exc)}; trying again "
                    f"in {delay:g} s (attempt {attempt + 2} of {retries + 1})")
            sleep(delay)
            delay = min(delay * 4, 60.0)
    raise AssertionError("unreachable")


def _sqlalchemy_error() -> type[Exception]:
    from sqlalchemy.exc import OperationalError

    return OperationalError


def _integrity_error() -> type[Exception]:
    from sqlalchemy.exc import IntegrityError

    return IntegrityError


def _programming_error() -> type[Exception]:
    from sqlalchemy.exc import ProgrammingError

    return ProgrammingError


def first_line(exc: BaseException) -> str:
    """The first line of an error's text, redacted: drivers quote the URL they were given."""
    text = str(exc).strip().splitlines()
    return redact(text[0]) if text else type(exc).__name__


def sqlite_unwritable(url: str) -> str | None:
    """Why a SQLite study at ``url`` could not be written — its folder takes no new file (the
    database, its journal, the lock file), or the database cannot be opened for writing — or None
    (also for a server database). Writes nothing: the probe is an unnamed temporary file, gone when
    closed."""
    path = sqlite_path(url)
    if path is None:
        return None
    try:
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        return f"cannot create files in {path.parent}: {exc.strerror or exc}"
    try:
        if path.exists():
            with open(path, "r+b"):  # opened for writing, nothing written
                pass
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    return None


@contextmanager
def study_lock(url: str) -> Iterator[None]:
    """Exclusive use of a SQLite study for this process (no-op for server databases)."""
    path = sqlite_path(url)
    if path is None:
        yield
        return
    lock_path = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # a read-only or pseudo file system, a folder without write permission
        raise StorageUnavailable(
            f"cannot open storage {redact(url)}: cannot create its lock file {lock_path}: "
            f"{exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            raise StudyBusy(
                f"{path} is in use by spectune (pid {owner}); SQLite studies take one tuner at a "
                "time — use PostgreSQL for several workers") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def open_study(url: str, name: str, sampler: optuna.samplers.BaseSampler, directions: Sequence[str],
               metric_names: list[str] | None = None, *,
               heartbeat_interval_s: int = HEARTBEAT_INTERVAL_S,
               heartbeat_grace_s: int = HEARTBEAT_GRACE_S, say: Callable[[str], None] | None = None,
               announce: bool = True) -> optuna.Study:
    if is_server_database(url) and say is not None and announce:
        say(f"connecting to {redact(url)} … (up to {CONNECT_TIMEOUT_S} s per attempt)")

    def connect() -> optuna.storages.BaseStorage:
        return make_storage(url, heartbeat_interval_s=heartbeat_interval_s,
                            heartbeat_grace_s=heartbeat_grace_s, raise_unreachable=True)

    storage = with_storage_retries(connect, "connecting", url, retries=OPEN_RETRIES, say=say)

    def create() -> optuna.Study:
        return optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                                   directions=directions,  # type: ignore[arg-type]
                                   load_if_exists=True)

    try:
        study = with_storage_retries(create, "opening the study", url, say=say)
    except ValueError as exc:
        raise SpectuneError(f"study {name!r} in {redact(url)}: {first_line(exc)}") from None
    if [d.name.lower() for d in study.directions] != list(directions):
        raise SpectuneError(f"study {name!r} in {redact(url)} was created with other objectives "
                            f"({[d.name.lower() for d in study.directions]}); use a new study name")
    if metric_names and study.metric_names != metric_names:
        # experimental since 3.2, stable in practice; names show in the dashboard
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(metric_names)
    return study


def recover_interrupted(study: optuna.Study) -> list[int]:
    """Fail trials a dead tuner left RUNNING and queue their parameters again — and those of any
    FAIL trial whose re-queue a kill prevented. Returns the numbers of the trials queued again.

    Only valid while holding ``study_lock`` (SQLite): no live process can own a RUNNING trial then.
    On a server database another worker may be running them: there Optuna's heartbeat finds the dead
    ones."""
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(trial.number, state=TrialState.FAIL)
    return requeue_unretried(study)


#: An interrupted trial is queued again at most this many times in a row (Optuna's stale-trial
#: callback: 3).
MAX_RETRIES = 3


#: What a queued point is, kept by its retry: the baseline (1.0), a reference point (adaptive,
#: off) and whether it lies outside the space (the space then asks for its parameters as
#: queued), and the flags it proposes (shown while it waits).
_KEPT_BY_A_RETRY = (Key.BASELINE, Key.REFERENCE, OUTSIDE, Key.PARAMS_DECODED)


def retry_attrs(trial: FrozenTrial) -> dict[str, Any]:
    """What a trial's retry carries: where it comes from, and what it was queued as."""
    attrs: dict[str, Any] = {Key.RETRY_OF: trial.number}
    for key in _KEPT_BY_A_RETRY:
        if trial.user_attrs.get(key):
            attrs[key] = trial.user_attrs[key]
    return attrs


def params_of(trial: FrozenTrial) -> dict[str, Any]:
    """The parameters a retry of ``trial`` takes: its own, or — for a queued trial interrupted
    before its objective asked for them (inside Optuna's ``ask``: the baseline, a designed-start
    point) — the ones it was queued with."""
    return dict(trial.params or queued_params(trial) or {})


def has_retry(trials: list[FrozenTrial], number: int) -> bool:
    """Whether trial ``number``'s parameters were queued again: by us (``retry_of``) or by Optuna's
    stale-trial callback (``retry_history``)."""
    return any(t.user_attrs.get(Key.RETRY_OF) == number or number in retried_from(t)
               for t in trials)


def requeue_unretried(study: optuna.Study) -> list[int]:
    """Queue again every interrupted trial that has no retry: a kill after Optuna recorded the FAIL
    and before it was queued again would otherwise lose it. A FAIL that gave its point up on purpose
    (another worker was measuring the same configuration) is not one, nor a trial interrupted
    ``MAX_RETRIES`` times in a row."""
    trials = study.get_trials(deepcopy=False)
    queued = []
    for t in trials:
        if (t.state != TrialState.FAIL or not params_of(t)
            or t.user_attrs.get(Key.OUTCOME) == "taken"
                or has_retry(trials, t.number) or _retry_depth(trials, t) >= MAX_RETRIES):
            continue
        study.enqueue_trial(params_of(t), user_attrs=retry_attrs(t))
        queued.append(t.number)
    return queued


def _retry_depth(trials: list[FrozenTrial], trial: FrozenTrial) -> int:
    depth, seen = 0, set()
    while (previous := trial.user_attrs.get(Key.RETRY_OF)) is not None and previous not in seen:
        seen.add(previous)
        depth += 1
        trial = trials[previous]
    return depth
