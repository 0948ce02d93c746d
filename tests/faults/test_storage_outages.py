"""Storage outages during a trial: real PostgreSQL stopped and started (pg_ctl), a SQLite file
replaced.

A short outage is retried call by call and invisible (exit 0, nothing lost); one past the retry
window (shortened with SPECTUNE_STORAGE_BACKOFF) ends in exit 4, one line, no server left, and the
study resumes whole. PostgreSQL also carries the hang of issue 12 item 1a: an interrupt inside
Optuna's ``ask`` left a RUNNING trial without a heartbeat row, and the resumed study waited for it
forever.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tests.faults.conftest import (
    assert_one_line,
    assert_resumes_whole,
    finish,
    make_study,
    study_name,
    tune,
    wait_for_server,
    wait_gone,
)
from tests.postgres import pg_start, pg_stop

N = 3
SHORT = {"SPECTUNE_STORAGE_BACKOFF": "0.5,0.5,0.5"}


# Minutes of real outages and back-offs: run with `pytest -m storage_outage tests/faults`
# (docs/study.md); the default test command leaves them out to keep the suite's time budget.
pytestmark = [pytest.mark.storage_outage, pytest.mark.fault("storage")]


@pytest.mark.parametrize("fault", ["after_ask@2:term", "after_ask@2:kill"])
def test_postgres_interrupt_inside_ask_does_not_hang_the_resume(tmp_path: Path, pg_url: str,
                                                                fault: str) -> None:
    study = make_study(tmp_path, f"fault-pg-ask-{fault[-4:]}", n_trials=N, storage=pg_url)
    code, err = finish(tune(study, fault))
    assert code in (-9, 143), err
    # a SIGKILLed tuner leaves its server: the resume must stop it (checked at its end)
    if code == 143:
        assert wait_gone(study_name(study)) == []
    assert_resumes_whole(study, N)  # the deadline of finish() catches the hang


def test_postgres_stopped_six_seconds_mid_trial_is_invisible(tmp_path: Path, pg_url: str) -> None:
    study = make_study(tmp_path, "fault-pg-blip", n_trials=N, storage=pg_url)
    proc = tune(study)
    wait_for_server(study_name(study), proc)
    pg_stop(pg_url)
    time.sleep(6)  # the outage itself, not a wait for the tuner
    pg_start(pg_url)
    code, err = finish(proc)
    assert code == 0, err
    assert "Traceback" not in err
    assert_resumes_whole(study, N)


def test_postgres_down_past_the_retry_window_exits_4(tmp_path: Path, pg_url: str) -> None:
    study = make_study(tmp_path, "fault-pg-down", n_trials=N, storage=pg_url)
    proc = tune(study, **SHORT)
    wait_for_server(study_name(study), proc)
    pg_stop(pg_url)
    try:
        code, err = finish(proc)
    finally:
        pg_start(pg_url)
    assert code == 4, err
    assert_one_line(err, contains="kept failing")
    assert wait_gone(study_name(study)) == []
    assert_resumes_whole(study, N)


def _replace(db: Path) -> Path:
    """Put a file that is no database where the study's database was; the original aside."""
    aside = db.with_name(db.name + ".aside")
    shutil.move(db, aside)
    db.write_bytes(b"this is not a SQLite database\n" * 64)
    return aside


def test_sqlite_file_replaced_for_a_while_is_retried(tmp_path: Path) -> None:
    study = make_study(tmp_path, "fault-sqlite-blip", n_trials=N)
    proc = tune(study)
    wait_for_server(study_name(study), proc)
    db = study.with_suffix(".db")
    aside = _replace(db)
    time.sleep(3)  # the outage itself
    shutil.move(aside, db)
    code, err = finish(proc)
    assert code == 0, err
    assert "Traceback" not in err
    assert_resumes_whole(study, N)


def test_sqlite_file_replaced_for_good_exits_4(tmp_path: Path) -> None:
    study = make_study(tmp_path, "fault-sqlite-gone", n_trials=N)
    proc = tune(study, **SHORT)
    wait_for_server(study_name(study), proc)
    db = study.with_suffix(".db")
    aside = _replace(db)
    code, err = finish(proc)
    assert code == 4, err
    assert_one_line(err, contains="kept failing")
    assert wait_gone(study_name(study)) == []
    shutil.move(aside, db)
    assert_resumes_whole(study, N)
