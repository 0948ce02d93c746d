"""The baseline killed on every retry: the study stops (exit 6, one line) rather than let a
designed-start point define 1.0, and the next run measures the baseline first.

Four kills during the baseline — as Optuna hands it out, at its deploy, and in its C=64 phase — use
up its retries (each start re-queues an interrupted trial at most three times in a row). Before
issue 26 the fifth start went on with the designed start, whose first point became the reference
without a word.
"""

from __future__ import annotations

import os
from pathlib import Path

import optuna
import pytest

from tests.faults.conftest import assert_one_line, load, wait_gone
from tests.faults.forkserver import ForkServer
from tests.faults.quick import DEADLINE_S, counted, err, name_of, start, tiny_study
from tuner.store.keys import Key, StudyKey

#: Where each start is killed: its first trial is the baseline (or its retry). Two kills before any
#: server starts keep the case cheap; the others leave a server for the next start to stop.
KILLS = ("after_ask", "after_spawn", "after_ask", "phase_c64")
ARGS = ["--n-trials", "1", "--confirm", "0"]


@pytest.mark.fault("kill_points")
def test_a_baseline_killed_on_every_retry_stops_the_study(forks: ForkServer,
                                                          tmp_path: Path) -> None:
    study = tiny_study(tmp_path, f"fault-baseline-kept-{os.getpid()}")
    for point in KILLS:
        code = forks.wait(start(forks, study, ARGS, f"{point}:kill"), DEADLINE_S)
        assert code == -9, err(study).read_text()[-2000:]
    code = forks.wait(start(forks, study, ARGS), DEADLINE_S)
    text = err(study).read_text()
    assert code == 6, text[-2000:]
    assert_one_line(text,
                    contains="the baseline (trial 0) was interrupted 4 times and never measured")
    assert wait_gone(name_of(study), timeout=10) == []
    trials = load(study).get_trials(deepcopy=False)
    assert not counted(trials), "a trial was measured without the baseline"
    assert [t.state for t in trials
            if t.user_attrs.get(Key.BASELINE)][-1] == optuna.trial.TrialState.WAITING
    # The next run is the answer: the baseline is measured first and defines 1.0.
    code = forks.wait(start(forks, study, ARGS), DEADLINE_S)
    assert code == 0, err(study).read_text()[-2000:]
    s = load(study)
    reference = s.trials[s.user_attrs[StudyKey.REFERENCES_TRIAL]]
    assert reference.user_attrs.get(Key.BASELINE) is True \
           and reference.user_attrs[Key.SCORE] == pytest.approx(1.0)
    assert reference in counted(s.get_trials(deepcopy=False))
