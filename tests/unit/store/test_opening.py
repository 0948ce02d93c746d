"""Opening a stored study for reading creates nothing, and no message carries a password."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.study_factory import write_study_file
from tuner.store.opening import StudyNotFound, open_existing_study
from tuner.store.storage import StorageUnavailable, redact
from tuner.study.load import load_study_file


@pytest.mark.parametrize(("text", "shown"), [
    ("postgresql+psycopg://tuner:pw@db/s", "postgresql+psycopg://tuner:***@db/s"),
    ("mysql://u:p%40ss@h:3306/s?password=x&ssl=1", "mysql://u:***@h:3306/s?password=***&ssl=1"),
    ("cannot open 'postgresql://a:b@h/d': refused",
     "cannot open 'postgresql://a:***@h/d': refused"),
    ("postgresql://tuner@db/s", "postgresql://tuner@db/s"),
    ("postgresql+psycopg://tuner:p@ss@db/s", "postgresql+psycopg://tuner:***@db/s"),
    ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
])
def test_redact(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_a_missing_sqlite_file_is_not_created(tmp_path: Path) -> None:
    spec = load_study_file(write_study_file(tmp_path, "never"))
    with pytest.raises(StudyNotFound, match=r"has never run.*no database at"):
        open_existing_study(spec)
    assert list(tmp_path.iterdir()) == [tmp_path / "never.toml"]


def test_a_file_that_is_no_database_is_a_storage_error_and_stays_as_it_was(tmp_path: Path) -> None:
    spec = load_study_file(write_study_file(tmp_path, "junk"))
    db = tmp_path / "junk.db"
    db.write_bytes(b"not a database, just bytes " * 100)
    with pytest.raises(StorageUnavailable) as caught:
        open_existing_study(spec)
    assert caught.value.exit_code == 4
    assert db.read_bytes() == b"not a database, just bytes " * 100
