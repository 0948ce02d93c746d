"""SIGINT and SIGTERM at every stage of ``spectune tune``, once and twice (the second during the first's cleanup).

The matrix: {SIGINT, SIGTERM} × {one signal, a second one while the first is handled} × the stages — before
the study loop, during a deploy, the readiness wait, the C=1 phase, the C=64 phase, between two trials, the
confirmation stage and the final restore. Each case stops the tuner at its stage with a ``wait`` fault point
(tuner/core/faults.py: the tuner stops there and says so), sends a real signal from outside, and for the
second signal waits at the cleanup (``cleanup``; before the loop there is none, so on the way out: ``exiting``).
It asserts the documented exit code (128 + the first signal: 130 / 143, docs/study.md), one line of error, no
server of the study left (the targets' marker scan), and nothing lost: no trial left RUNNING, the interrupted
one queued again.

Cheap by construction: a three-point space, one measured study prepared once and copied per case, and every
``spectune tune`` forked from a server that has imported the command line already (tests/faults/forkserver.py).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from tests.faults.conftest import RUN, assert_one_line, load, make_study, wait_gone
from tests.faults.forkserver import ForkServer
from tuner.engine.storage import has_retry

DEADLINE_S = 120.0  # a hang shows as this passing (the cases take seconds)

#: stage → (its fault point, whether it starts from the measured study, the arguments of `spectune tune`).
STAGES: dict[str, tuple[str, bool, list[str]]] = {
    "before_loop": ("after_baseline_enqueue", False, ["--n-trials", "1"]),
    "deploy": ("after_spawn", True, ["--n-trials", "3"]),  # the server spawned, its pid file not yet written
    "readiness": ("readiness", True, ["--n-trials", "3"]),
    "c1": ("phase_c1", True, ["--n-trials", "3"]),
    "c64": ("phase_c64", True, ["--n-trials", "3"]),
    "between_trials": ("between_trials@2", True, ["--n-trials", "4"]),  # trial 2 measured, its server still up
    "confirmation": ("confirmation", True, ["--n-trials", "2", "--confirm", "1", "--repeats", "1"]),
    "final_restore": ("final_finish", True, ["--n-trials", "2", "--confirm", "0"]),
}
#: Stages that catch a trial mid-flight: it must be FAIL and queued again.
IN_TRIAL = {"deploy", "readiness", "c1", "c64"}
SIGNALS = {"int": signal.SIGINT, "term": signal.SIGTERM}


def _tiny(tmp_path: Path, name: str) -> Path:
    """The fault suite's short study over a three-point space (loading a study enumerates its space)."""
    study = make_study(tmp_path, name, n_trials=2)
    text = study.read_text()
    text = re.sub(r"\[search\].*?\n\n", "[search]\nspeculative-num-steps = { choices = [3, 4, 5] }\n\n", text,
                  flags=re.S)
    text = re.sub(r"\[baseline\].*?\n\n", "[baseline]\nspeculative-num-steps = 3\n\n", text, flags=re.S)
    text = text.replace("enable-metrics = true", "enable-metrics = true\nspeculative-eagle-topk = 1\n"
                        "mem-fraction-static = 0.86\ncuda-graph-max-bs-decode = 64")
    study.write_text(text)
    return study


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    forks = ForkServer()
    yield forks
    forks.close()


def _run(server: ForkServer, study: Path, args: list[str], fault: str = "") -> tuple[int, Path]:
    env = dict(os.environ, SPECTUNE_FAULT=fault, SPECTUNE_FAULT_REACHED=str(study.with_suffix(".reached")))
    pid = server.start(["tune", str(study), *args, "--no-report"], env=env, cwd=study.parent,
                       out=study.with_suffix(".out"), err=study.with_suffix(".err"))
    return pid, study.with_suffix(".err")


@pytest.fixture(scope="module")
def measured(server: ForkServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A study with two measured trials (the baseline and one more): the database the cases start from."""
    study = _tiny(tmp_path_factory.mktemp("signals"), f"fault-sig-base-{RUN}")
    pid, err = _run(server, study, ["--confirm", "0"])
    assert server.wait(pid, DEADLINE_S) == 0, err.read_text()
    return study.with_suffix(".db")


def _copy_of(measured: Path, study: Path) -> None:
    """``measured``'s database as ``study``'s, under ``study``'s name."""
    db = study.with_suffix(".db")
    shutil.copy(measured, db)
    name = re.search(r'^name = "(.*)"', study.read_text(), re.M)
    assert name is not None
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE studies SET study_name = ?", (name.group(1),))


def _exited(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _reach(reached: Path, point: str, pid: int, err: Path) -> None:
    """Until the tuner waits at ``point`` (it appends the point's name to ``reached``)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if reached.exists() and point in reached.read_text().split():
            return
        if _exited(pid):
            pytest.fail(f"the tuner ended before {point}: {err.read_text()}")
        time.sleep(0.02)
    pytest.fail(f"the tuner never reached {point}")


@pytest.mark.parametrize("times", [1, 2], ids=["once", "twice"])
@pytest.mark.parametrize("sig", sorted(SIGNALS))
@pytest.mark.parametrize("stage", list(STAGES))
def test_signal_at_every_stage(server: ForkServer, measured: Path, tmp_path: Path, stage: str, sig: str,
                               times: int) -> None:
    point, resumed, args = STAGES[stage]
    name = point.split("@")[0]
    second = "exiting" if stage == "before_loop" else "cleanup"
    study = _tiny(tmp_path, f"fault-sig-{stage}-{sig}-{times}")
    if resumed:
        _copy_of(measured, study)
    fault = f"{point}:wait" + (f",{second}:wait" if times == 2 else "")
    pid, err = _run(server, study, args, fault)
    reached = study.with_suffix(".reached")
    _reach(reached, name, pid, err)
    os.kill(pid, SIGNALS[sig])
    if times == 2:
        _reach(reached, second, pid, err)
        os.kill(pid, SIGNALS[sig])
    code = server.wait(pid, DEADLINE_S)
    text = err.read_text()
    assert code == 128 + SIGNALS[sig], text
    assert_one_line(text, contains=f"interrupted by {SIGNALS[sig].name}")
    assert reached.read_text().split() == [name] + ([second] if times == 2 else [])
    study_name = re.search(r'^name = "(.*)"', study.read_text(), re.M)
    assert study_name is not None and wait_gone(study_name.group(1), timeout=10) == []
    trials = load(study).get_trials(deepcopy=False)
    assert not [t.number for t in trials if t.state == optuna.trial.TrialState.RUNNING]
    if stage in IN_TRIAL:
        hit = trials[2]  # the measured study's next trial
        assert hit.state == optuna.trial.TrialState.FAIL and has_retry(trials, hit.number)
