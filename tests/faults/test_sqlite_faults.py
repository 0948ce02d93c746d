"""SQLite storage faults while a trial is measured: the study's directory made read-only, its
database file deleted or replaced, the disk full — each for a while (retried with backoff,
invisible: exit 0, nothing lost) and for good (past the retry window: exit 4, one line, no server
left; once the fault is gone the study resumes whole: n_trials measured, none twice, none RUNNING).

The tuner stands still inside the C=1 phase (a ``wait`` fault point) while the fault is made, so the
fault meets the trial's next write, whatever the machine's speed. The disk is "full" through the
tuner's own file- size limit (RLIMIT_FSIZE set from outside with prlimit: writes past it fail as on
a full disk, no root, no mount); the read-only directory holds for root too, as the fork server runs
without CAP_DAC_OVERRIDE. A short retry window (SPECTUNE_STORAGE_BACKOFF) keeps "for good" to
seconds; still a minute in all, so these run apart with the other outages: ``pytest -m
storage_outage tests/faults``.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest

from tests.faults.conftest import assert_one_line, error_lines, load, wait_gone
from tests.faults.forkserver import ForkServer
from tests.faults.quick import (
    DEADLINE_S,
    copy_of,
    counted,
    err,
    name_of,
    reach,
    reached,
    start,
    tiny_study,
)
from tuner.store.keys import Key

pytestmark = [pytest.mark.storage_outage, pytest.mark.fault("storage")]

ARGS = ["--n-trials", "3", "--confirm", "0"]  # from the measured study: one more trial
#: A while: the first retry comes after 0.5 s, the window is long enough for the fault to be lifted
#: first.
A_WHILE = {"SPECTUNE_STORAGE_BACKOFF": "0.5,1,2,4,8"}
FOR_GOOD = {"SPECTUNE_STORAGE_BACKOFF": "0.3,0.3,0.3"}

# (make it, undo it): (db, tuner pid)
Fault = tuple[Callable[[Path, int], None], Callable[[Path, int], None]]


def _read_only(db: Path, _pid: int) -> None:
    db.parent.chmod(0o555)  # no journal can be created beside the database


def _writable(db: Path, _pid: int) -> None:
    db.parent.chmod(0o755)


def _delete(db: Path, _pid: int) -> None:
    # the test keeps the file, the study's path loses it
    os.link(db, db.with_name(db.name + ".aside"))
    db.unlink()


def _put_back(db: Path, _pid: int) -> None:
    os.replace(db.with_name(db.name + ".aside"), db)


def _replace(db: Path, pid: int) -> None:
    os.replace(db, db.with_name(db.name + ".aside"))
    db.write_bytes(b"this is not a SQLite database\n" * 64)


def _fill(db: Path, pid: int) -> None:
    # The tuner may write no file past the database's size: growing the database fails as on a full
    # disk.
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (db.stat().st_size, resource.RLIM_INFINITY))


def _free(db: Path, pid: int) -> None:
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


#: What the one line says the cause was (the database's own words; EFBIG reads as an I/O error to
#: SQLite).
CAUSES = {"read_only_dir": "readonly database", "deleted": "was deleted",
          "replaced": "replaced by another file", "disk_full": "disk"}

FAULTS: dict[str, Fault] = {
    "read_only_dir": (_read_only, _writable),
    "deleted": (_delete, _put_back),
    "replaced": (_replace, _put_back),
    "disk_full": (_fill, _free),
}


def _during_c1(forks: ForkServer, measured: Path, tmp_path: Path, fault: str,
               env: dict[str, str]) -> tuple[Path, int]:
    """A tuner measuring its next trial, the fault made while it stands still inside C=1, then let
    go."""
    study = tiny_study(tmp_path, f"fault-sqlite-{fault}-{os.getpid()}")
    copy_of(measured, study)
    pid = start(forks, study, ARGS, "phase_c1:wait", **env)
    reach(study, "phase_c1", pid)
    FAULTS[fault][0](study.with_suffix(".db"), pid)
    reached(study).unlink()  # go on
    return study, pid


def _warned(study: Path, pid: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while "trying again in" not in err(study).read_text():
        assert time.monotonic() < deadline, "no storage retry was announced"
        time.sleep(0.02)


def error_line(text: str) -> str:
    return error_lines(text)[0].split("kept failing", 1)[1]


def _whole(study: Path) -> None:
    trials = load(study).get_trials(deepcopy=False)
    measured = counted(trials)
    assert len(measured) == 3, [(t.number, t.state) for t in trials]
    keys = [t.user_attrs[Key.CONFIG_KEY] for t in measured]
    assert len(keys) == len(set(keys)), "a configuration was measured twice"
    assert not [t for t in trials if t.state == optuna.trial.TrialState.RUNNING]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_sqlite_fault_for_a_while_is_retried(forks: ForkServer, measured: Path, tmp_path: Path,
                                               fault: str) -> None:
    study, pid = _during_c1(forks, measured, tmp_path, fault, A_WHILE)
    try:
        _warned(study, pid)
    finally:
        FAULTS[fault][1](study.with_suffix(".db"), pid)
    code = forks.wait(pid, DEADLINE_S)
    text = err(study).read_text()
    assert code == 0, text
    assert "Traceback" not in text and "error:" not in text, text
    _whole(study)


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_sqlite_fault_for_good_exits_4_then_resumes(forks: ForkServer, measured: Path,
                                                      tmp_path: Path, fault: str) -> None:
    study, pid = _during_c1(forks, measured, tmp_path, fault, FOR_GOOD)
    code = forks.wait(pid, DEADLINE_S)
    if fault != "disk_full":  # a file-size limit ends with its process
        FAULTS[fault][1](study.with_suffix(".db"), pid)
    text = err(study).read_text()
    assert code == 4, text
    assert_one_line(text, contains="kept failing")
    assert CAUSES[fault] in error_line(text), text
    assert wait_gone(name_of(study), timeout=10) == []
    assert forks.wait(start(forks, study, ARGS), DEADLINE_S) == 0, err(study).read_text()
    _whole(study)
