"""Cheap ``spectune tune`` runs for the fault matrices: a three-point study, a measured database
copied per case, each run forked from the fork server (tests/faults/forkserver.py) and stopped at a
named point."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import time
from pathlib import Path

import optuna
import pytest

from tests.faults.conftest import make_study
from tests.faults.forkserver import ForkServer

DEADLINE_S = 120.0  # a hang shows as this passing (the cases take seconds)


def tiny_study(tmp_path: Path, name: str) -> Path:
    """The fault suite's short study over a three-point space (loading a study enumerates its
    space)."""
    study = make_study(tmp_path, name, n_trials=2)
    text = study.read_text()
    text = re.sub(r"\[search\].*?\n\n",
                  "[search]\nspeculative-num-steps = { choices = [3, 4, 5] }\n\n", text, flags=re.S)
    text = re.sub(r"\[baseline\].*?\n\n", "[baseline]\nspeculative-num-steps = 3\n\n", text,
                  flags=re.S)
    text = text.replace("enable-metrics = true",
                        "enable-metrics = true\nspeculative-eagle-topk = 1\n"
                        "mem-fraction-static = 0.86\ncuda-graph-max-bs-decode = 64")
    study.write_text(text)
    return study


def name_of(study: Path) -> str:
    found = re.search(r'^name = "(.*)"', study.read_text(), re.M)
    assert found is not None
    return found.group(1)


def start(forks: ForkServer, study: Path, args: list[str], fault: str = "", **env: str) -> int:
    """``spectune tune STUDY ARGS --no-report`` forked; its stderr goes to ``err(study)``."""
    full = dict(os.environ, SPECTUNE_FAULT=fault, SPECTUNE_FAULT_REACHED=str(reached(study)), **env)
    return forks.start(["tune", str(study), *args, "--no-report"], env=full, cwd=study.parent,
                       out=study.with_suffix(".out"), err=err(study))


def err(study: Path) -> Path:
    return study.with_suffix(".err")


def reached(study: Path) -> Path:
    return study.with_suffix(".reached")


def copy_of(measured: Path, study: Path) -> None:
    """``measured``'s database as ``study``'s, under ``study``'s name."""
    db = study.with_suffix(".db")
    shutil.copy(measured, db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE studies SET study_name = ?", (name_of(study),))


def exited(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def reach(study: Path, point: str, pid: int) -> None:
    """Until the tuner waits at ``point`` (it appends the point's name to ``reached(study)``)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if reached(study).exists() and point in reached(study).read_text().split():
            return
        if exited(pid):
            pytest.fail(f"the tuner ended before {point}: {err(study).read_text()}")
        time.sleep(0.02)
    pytest.fail(f"the tuner never reached {point}")


def make_measured(forks: ForkServer, folder: Path) -> Path:
    """A database with two measured trials (the baseline and one more): what the cases start
    from."""
    study = tiny_study(folder, f"fault-base-{os.getpid()}")
    pid = start(forks, study, ["--confirm", "0"])
    assert forks.wait(pid, DEADLINE_S) == 0, err(study).read_text()
    return study.with_suffix(".db")


def counted(trials: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    from tuner.store.keys import Key

    return [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE
            and t.user_attrs.get(Key.COUNTS)]
