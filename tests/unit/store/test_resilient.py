"""The storage that rides out outages (tuner/store/resilient.py), on a real SQLite file: a call
meeting an outage is retried with the announced backoff and, past the window, fails with one reason
that names the cause — the database's own error, not Optuna's wrapper; a file deleted or replaced as
such, without a new empty database left at the path. (Whole tuner runs under each fault:
tests/faults/test_sqlite_faults.py.)"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import optuna
import pytest
from sqlalchemy.exc import OperationalError

from tuner.store.resilient import cause_of, refused_for_good
from tuner.store.storage import StorageUnavailable, make_storage, with_storage_retries


@pytest.fixture
def storage(tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> tuple[optuna.storages.BaseStorage, Path]:
    monkeypatch.setenv("SPECTUNE_STORAGE_BACKOFF", "0.01,0.01")
    db = tmp_path / "s.db"
    made = make_storage(f"sqlite:///{db}")
    optuna.create_study(storage=made, study_name="s")
    return made, db


def test_a_deleted_file_fails_as_deleted_and_no_empty_database_appears(
        storage: tuple[optuna.storages.BaseStorage, Path],
        caplog: pytest.LogCaptureFixture) -> None:
    made, db = storage
    db.unlink()
    with caplog.at_level(logging.WARNING), pytest.raises(StorageUnavailable) as raised:
        made.get_all_studies()
    assert f"the database file {db} was deleted" in str(raised.value) \
           and "kept failing for 0.02 s" in str(raised.value)
    assert not db.exists()  # SQLite would have created an empty database here
    assert [r.getMessage().split("; ")[1] for r in caplog.records] == [
        "trying again in 0.01 s (attempt 2 of 3)", "trying again in 0.01 s (attempt 3 of 3)"]
    with pytest.raises(StorageUnavailable):  # given up on: every later call fails at once
        made.get_all_studies()


def test_a_replaced_file_is_retried_until_the_original_is_back(
        storage: tuple[optuna.storages.BaseStorage, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    made, db = storage
    aside = db.with_name("aside.db")
    os.replace(db, aside)
    db.write_bytes(b"not a database")
    sleeps: list[float] = []

    def back(seconds: float) -> None:  # the operator puts the file back during the first pause
        sleeps.append(seconds)
        os.replace(aside, db)

    monkeypatch.setattr("tuner.store.resilient.time.sleep", back)
    assert [s.study_name for s in made.get_all_studies()] == ["s"]
    assert sleeps == [0.01]


def test_the_reason_is_the_databases_own_error() -> None:
    inner = OperationalError("INSERT ...", {}, Exception("database or disk is full"))
    try:
        try:
            raise inner
        except OperationalError as exc:
            raise optuna.exceptions.StorageInternalError(
                "An exception is raised during the commit.") from exc
    except optuna.exceptions.StorageInternalError as wrapped:
        assert cause_of(wrapped) is inner
    plain = OperationalError("SELECT", {}, Exception("locked"))
    assert cause_of(plain) is plain


@pytest.mark.parametrize(("message", "for_good"), [
    ('connection to server at "127.0.0.1", port 5432 failed: FATAL:  password authentication '
     'failed for user "t"',
     True),
    ('connection to server at "127.0.0.1", port 5432 failed: FATAL:  database "tuning" does not '
     'exist', True),
    ("(1045, \"Access denied for user 'tuner'@'localhost' (using password: YES)\")", True),
    ('connection to server at "127.0.0.1", port 5432 failed: Connection refused', False),
    ("server closed the connection unexpectedly", False),
    ("database is locked", False),
])
def test_a_server_refusing_the_connection_itself_is_not_retried(message: str,
                                                                for_good: bool) -> None:
    """A wrong password or an unknown database is the same answer after any wait; an outage is
    not."""
    wrapped = OperationalError("SELECT 1", {}, Exception(message))
    assert refused_for_good(wrapped) is for_good


def test_with_storage_retries_gives_up_at_once_on_a_refused_password() -> None:
    calls: list[float] = []

    def refuse() -> None:
        raise OperationalError("connect", {},
                               Exception('FATAL:  password authentication failed for user "t"'))

    with pytest.raises(StorageUnavailable,
                       match=r"refused the connection while opening: .*password authentication"):
        with_storage_retries(refuse, "opening", "postgresql://t:secret@127.0.0.1/db",
                             sleep=calls.append)
    assert calls == []  # not one wait
