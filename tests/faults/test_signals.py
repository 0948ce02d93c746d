"""SIGINT and SIGTERM at every stage of ``spectune tune``, once and twice (the second during the
first's cleanup).

The matrix: {SIGINT, SIGTERM} × {one signal, a second one while the first is handled} × the stages —
before the study loop, during a deploy, the readiness wait, the C=1 phase, the C=64 phase, between
two trials, the confirmation stage, the final restore, and while Optuna stores a measured trial
(``tell``). Each case stops the tuner at its stage with a ``wait`` fault point
(tuner/core/faults.py: the tuner stops there and says so), sends a real signal from outside, and for
the second signal waits at the cleanup (``cleanup``; before the loop there is none, so on the way
out: ``exiting``). It asserts the documented exit code (128 + the first signal: 130 / 143,
docs/study.md), one line of error, no server of the study left (the targets' marker scan), and
nothing lost: no trial left RUNNING, the interrupted one queued again, the one being stored stored
whole.

Cheap by construction (tests/faults/quick.py): a three-point space, one measured study prepared once
and copied per case, and every ``spectune tune`` forked from a server that has imported it
(forkserver.py).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import optuna
import pytest

from tests.faults.conftest import assert_one_line, load, wait_gone
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
from tuner.store.storage import has_retry

#: stage → (its fault point, whether it starts from the measured study, the arguments of `spectune
#: tune`).
STAGES: dict[str, tuple[str, bool, list[str]]] = {
    "before_loop": ("after_baseline_enqueue", False, ["--n-trials", "1"]),
    # the server spawned, its pid file not yet written
    "deploy": ("after_spawn", True, ["--n-trials", "3"]),
    "readiness": ("readiness", True, ["--n-trials", "3"]),
    "c1": ("phase_c1", True, ["--n-trials", "3"]),
    "c64": ("phase_c64", True, ["--n-trials", "3"]),
    # trial 2 measured, its server still up
    "between_trials": ("between_trials@2", True, ["--n-trials", "4"]),
    # Trial 2 measured and returned to Optuna, which is storing it (its ``tell``): issue 26.
    "tell": ("tell", True, ["--n-trials", "4"]),
    "confirmation": ("confirmation", True, ["--n-trials", "2", "--confirm", "1", "--repeats", "1"]),
    "final_restore": ("final_finish", True, ["--n-trials", "2", "--confirm", "0"]),
}
#: Stages that catch a trial mid-flight: it must be FAIL and queued again.
IN_TRIAL = {"deploy", "readiness", "c1", "c64"}
#: Stages that catch a trial measured, its result being stored: it must be stored whole (COMPLETE,
#: counted).
STORED = {"tell"}
SIGNALS = {"int": signal.SIGINT, "term": signal.SIGTERM}

pytestmark = pytest.mark.fault("signals")


@pytest.mark.parametrize("times", [1, 2], ids=["once", "twice"])
@pytest.mark.parametrize("sig", sorted(SIGNALS))
@pytest.mark.parametrize("stage", list(STAGES))
def test_signal_at_every_stage(forks: ForkServer, measured: Path, tmp_path: Path, stage: str,
                               sig: str, times: int) -> None:
    point, resumed, args = STAGES[stage]
    name = point.split("@")[0]
    second = "exiting" if stage == "before_loop" else "cleanup"
    study = tiny_study(tmp_path, f"fault-sig-{stage}-{sig}-{times}-{os.getpid()}")
    if resumed:
        copy_of(measured, study)
    pid = start(forks, study, args, f"{point}:wait" + (f",{second}:wait" if times == 2 else ""))
    reach(study, name, pid)
    os.kill(pid, SIGNALS[sig])
    if times == 2:
        reach(study, second, pid)
        os.kill(pid, SIGNALS[sig])
    code = forks.wait(pid, DEADLINE_S)
    text = err(study).read_text()
    assert code == 128 + SIGNALS[sig], text
    assert_one_line(text, contains=f"interrupted by {SIGNALS[sig].name}")
    assert reached(study).read_text().split() == [name] + ([second] if times == 2 else [])
    assert wait_gone(name_of(study), timeout=10) == []
    trials = load(study).get_trials(deepcopy=False)
    assert not [t.number for t in trials if t.state == optuna.trial.TrialState.RUNNING]
    if stage in IN_TRIAL:
        hit = trials[2]  # the measured study's next trial
        assert hit.state == optuna.trial.TrialState.FAIL and has_retry(trials, hit.number)
    if stage in STORED:
        assert [t.number for t in counted(trials)] == [0, 1, 2], \
               [(t.number, t.state) for t in trials]
