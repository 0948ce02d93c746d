"""Signals while ``spectune`` starts, and command-line mistakes: one ``error:`` line each, never a
traceback.

The real program (its console script, a process of its own, not the fork server — whose children
have imported everything already): a SIGINT or SIGTERM while its modules import (the ``importing``
fault point, before the commands' modules load) or as a command begins (``command``: before ``tune``
imports the engine) ends it with exit 130 / 143 and one line, never a KeyboardInterrupt traceback or
a death by the signal, and nothing is created. A study path click itself refuses (a directory) is
one line too, like every other error. And SIGHUP, the other signal an overnight study meets (its
terminal closed), is handled like SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import optuna
import pytest

from tests.faults.conftest import assert_one_line, load, wait_gone
from tests.faults.forkserver import ForkServer
from tests.faults.quick import DEADLINE_S, copy_of, err, name_of, reach, start, tiny_study
from tests.helpers import spectune_command
from tuner.store.storage import has_retry

SIGNALS = {"int": signal.SIGINT, "term": signal.SIGTERM}


def _reach(proc: subprocess.Popen[str], reached: Path, point: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not (reached.exists() and point in reached.read_text().split()):
        assert proc.poll() is None, f"spectune ended before {point}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"spectune never reached {point}"
        time.sleep(0.02)


@pytest.mark.fault("signals")
@pytest.mark.parametrize("sig", sorted(SIGNALS))
@pytest.mark.parametrize("point", ["importing", "command"])
def test_a_signal_while_starting_is_one_line(tmp_path: Path, point: str, sig: str) -> None:
    study = tiny_study(tmp_path, f"fault-start-{point}-{sig}")
    reached = tmp_path / "reached"
    env = dict(os.environ, SPECTUNE_FAULT=f"{point}:wait", SPECTUNE_FAULT_REACHED=str(reached))
    proc = subprocess.Popen([*spectune_command(), "tune", str(study), "--no-report"],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    _reach(proc, reached, point)
    os.kill(proc.pid, SIGNALS[sig])
    _, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 128 + SIGNALS[sig], err  # not -2 / -15: a death by the signal
    assert_one_line(err, contains=f"interrupted by {SIGNALS[sig].name}")
    assert not study.with_suffix(".db").exists(), "a study was opened"


@pytest.mark.fault("study_mutations")
def test_a_study_path_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    for command in ("tune", "validate", "report"):
        result = subprocess.run(
            [*spectune_command(), command, str(tmp_path), *(["-o", "x"] * (command == "report"))],
            capture_output=True, text=True, cwd=tmp_path, timeout=DEADLINE_S)
        assert result.returncode == 2, result.stderr
        assert_one_line(result.stderr, contains="is a directory")
        assert result.stderr.count("\n") == 1 and not result.stdout, result.stderr


@pytest.mark.fault("signals")
def test_a_hangup_mid_trial_is_handled_like_sigterm(forks: ForkServer, measured: Path,
                                                    tmp_path: Path) -> None:
    """SIGHUP — the terminal of an overnight study closed — used to kill the tuner and leave its
    server running: now exit 129, one line, the server stopped, the trial queued again."""
    study = tiny_study(tmp_path, f"fault-hup-{os.getpid()}")
    copy_of(measured, study)
    pid = start(forks, study, ["--n-trials", "3"], "phase_c1:wait")
    reach(study, "phase_c1", pid)
    os.kill(pid, signal.SIGHUP)
    code = forks.wait(pid, DEADLINE_S)
    text = err(study).read_text()
    assert code == 128 + signal.SIGHUP, text
    assert_one_line(text, contains="interrupted by SIGHUP")
    assert wait_gone(name_of(study), timeout=10) == []
    trials = load(study).get_trials(deepcopy=False)
    assert trials[2].state == optuna.trial.TrialState.FAIL and has_retry(trials, 2)
