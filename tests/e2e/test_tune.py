"""`spectune tune` for real: the console script, the simulator as its own process, SQLite storage.

Includes the crash test of issue 6: the tuner is SIGKILLed at random moments several times; the
resumed study must end with exactly the requested number of measured trials, none RUNNING, none
measured twice, and no server of the study left running.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import optuna
import pytest

from tests.helpers import STUDIES, spectune_command
from tuner.run.loop import MAX_FAILED_STARTS
from tuner.store.keys import Key
from tuner.store.opening import open_existing_study
from tuner.study.load import load_study_file
from tuner.targets.process_group import marked_processes

N_TRIALS = 4
KILL_TEST_TRIALS = 6
#: Study names carry the test run's pid: servers are found by study name, and two test runs at once
#: (CI and a developer's) must not see each other's.
RUN = os.getpid()


def make_study(tmp_path: Path, name: str, *, n_trials: int = N_TRIALS,
               finish: str = "original") -> Path:
    text = (STUDIES / "simulated.toml").read_text()
    text = text.replace('name = "simulated-demo"', f'name = "{name}"')
    text = text.replace("n_trials = 12", f"n_trials = {n_trials}")
    text = re.sub(r"^time_scale = [0-9.]+", "time_scale = 400.0", text, flags=re.M)
    text = re.sub(r'^deploy = .*$', f'deploy = "{finish}"', text, flags=re.M)
    text = text.replace("{ concurrency = 1, requests = 8, warmup = 1 }",
                        "{ concurrency = 1, requests = 2, warmup = 1 }")
    text = text.replace("{ concurrency = 64, requests = 128, warmup = 8 }",
                        "{ concurrency = 64, requests = 64, warmup = 4 }")
    text = text.replace("max_tokens = 256", "max_tokens = 64")
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def tune(study: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([*spectune_command(), "tune", str(study), *args],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=study.parent)


def load(study: Path) -> optuna.Study:
    """The stored study as every reader opens it."""
    return open_existing_study(load_study_file(study))


def servers_of(name: str) -> list[int]:
    """Live processes started for study ``name`` (the targets' own marker scan)."""
    return marked_processes(name)


def wait_gone(name: str, timeout: float = 60.0) -> list[int]:
    # generous: on a busy machine a server's shutdown takes seconds; only a leak waits it out
    deadline = time.monotonic() + timeout
    while (left := servers_of(name)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_tune_runs_a_short_study_and_prints_the_best_command(tmp_path: Path) -> None:
    name = f"e2e-short-{RUN}"
    study = make_study(tmp_path, name, n_trials=3)
    proc = tune(study)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    assert "measured trials" in out
    assert "--speculative-num-steps" in out and "--speculative-algorithm EAGLE3" in out
    s = load(study)
    counted = [t for t in s.trials if t.user_attrs.get(Key.COUNTS)]
    assert len(counted) == 3
    assert s.trials[0].user_attrs.get("baseline") is True  # the current configuration runs first
    assert s.trials[0].params["speculative-num-steps"] == load_study_file(study).baseline[
        "--speculative-num-steps"]
    first = counted[0].user_attrs
    assert first["phases"]["1"]["per_request_tok_s_mean"] > 0 \
           and first["phases"]["64"]["aggregate_tok_s"] > 0
    assert first["timings"]["ready_s"] > 0 and "launch" in first
    # Stored as the real server would measure them (~100–400 tok/s for the seed profile), not 400×
    # faster (~100,000 tok/s). At 400× one decode step is ~40 µs, below what an event loop can time,
    # so the figure itself is rough: only its order of magnitude is checked.
    assert 5 < first["phases"]["1"]["per_request_tok_s_mean"] < 5000
    assert "#0 measured" in err  # one summary line per trial
    assert wait_gone(name) == []  # [finish] original: nothing of ours left running


def test_sigkill_at_random_moments_then_resume(tmp_path: Path) -> None:
    name = f"e2e-kill-{RUN}"
    study = make_study(tmp_path, name, n_trials=KILL_TEST_TRIALS)
    rng = random.Random(20261130)
    kills = 0
    for _ in range(3):
        # a killed tuner's server is still up: resume must deal with it
        before = set(servers_of(name))
        # the kills land in trials; confirmation has its own tests
        proc = tune(study, "--confirm", "0")
        # Random moments *into a trial* (a new server of the study is up), whatever this machine's
        # speed.
        deadline = time.monotonic() + 60
        while (not set(servers_of(name)) - before and proc.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 2.5))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        kills += 1
    final = tune(study, "--confirm", "0")
    _, err = final.communicate(timeout=300)
    assert final.returncode == 0, err
    assert kills >= 2
    s = load(study)
    counted = [t for t in s.trials if t.state == optuna.trial.TrialState.COMPLETE
               and t.user_attrs.get(Key.COUNTS)]
    assert len(counted) == KILL_TEST_TRIALS
    assert not [t for t in s.trials if t.state == optuna.trial.TrialState.RUNNING]
    keys = [t.user_attrs["config_key"] for t in counted]
    assert len(keys) == len(set(keys)), "a configuration was measured twice"
    assert wait_gone(name) == []


# into the deploy, a benchmark phase, a later trial
@pytest.mark.parametrize("delay", [0.2, 1.0, 2.5])
def test_sigterm_records_the_trial_and_restores(tmp_path: Path, delay: float) -> None:
    name = f"e2e-term-{RUN}-{int(delay * 10)}"
    study = make_study(tmp_path, name, n_trials=50)
    proc = tune(study)
    deadline = time.monotonic() + 60
    while not servers_of(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(delay)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=180)  # restoring the target on a busy machine
    assert proc.returncode == 143, err
    assert "interrupted by SIGTERM" in err
    assert "Traceback" not in err
    s = load(study)
    assert not [t for t in s.trials if t.state == optuna.trial.TrialState.RUNNING]
    interrupted = [t for t in s.trials if t.state == optuna.trial.TrialState.FAIL]
    waiting = [t for t in s.trials if t.state == optuna.trial.TrialState.WAITING]
    if interrupted:  # stopped mid-trial: its parameters are queued to be measured on resume
        # (an enqueued trial keeps its parameters as Optuna's "fixed_params" until it runs)
        assert waiting and waiting[-1].system_attrs["fixed_params"] == interrupted[-1].params
        # and `spectune trial N` shows what it requested and deployed, as `trials` does (not "none"
        # and "–")
        from click.testing import CliRunner

        from tuner.cli import main

        shown = CliRunner().invoke(main,
                                   ["trial", str(interrupted[-1].number), str(study), "--json"])
        assert shown.exit_code == 0, shown.stderr
        detail = json.loads(shown.stdout)
        assert detail["flags_requested"] and detail["flags_effective"], detail
        rows = json.loads(CliRunner().invoke(main, ["trials", str(study), "--json"]).stdout)[
            "trials"]
        row = next(r for r in rows if r["number"] == interrupted[-1].number)
        assert any(v is not None for v in row["flags"].values()), row
    assert wait_gone(name) == []


@pytest.mark.parametrize("bad", ["--timeout=8 hours", "--n-trials=0"])
def test_bad_options_are_one_line_errors(tmp_path: Path, bad: str) -> None:
    study = make_study(tmp_path, "e2e-bad")
    proc = tune(study, bad)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in err


def test_a_baseline_that_fails_to_start_stops_the_study_and_is_counted_as_such(
        tmp_path: Path) -> None:
    """The baseline runs out of memory at start: no other configuration is restarted after it, the
    end says how many trials used the server and that none was measured (not "N measured trials"),
    and no `deploy --best`."""
    name = f"e2e-basefail-{RUN}"
    study = make_study(tmp_path, name, n_trials=2 + 3 * MAX_FAILED_STARTS)
    # one GPU for a four-GPU model: every configuration runs out of memory at start, the
    # baseline's (0.98) included
    text = study.read_text().replace("max = 0.92, step = 0.02", "max = 0.98, step = 0.02") \
        .replace("tp-size = 4", "tp-size = 1")
    study.write_text(re.sub(r"(\[baseline\][^\[]*?)mem-fraction-static = 0\.86",
                            r"\1mem-fraction-static = 0.98", text, flags=re.S))
    proc = tune(study, "--no-report")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 7, err  # nothing measured: not a finished study to a script
    assert err.rstrip().splitlines()[-1] == (
        "error: nothing was measured: the baseline failed to start or to run, and the study "
        f"stopped there (`spectune trials {study}` lists each trial's failure)")
    assert f"study {name}: 1 trial(s) used the server, none measured" in out \
           and "(stopped: baseline-failed)" in out
    assert "the baseline — what the server runs today, measured first — failed to start" in out
    assert "deploy --best" not in out and "measured trials" not in out
    assert "confirmation: the top" not in err  # nothing to confirm: not announced
    used = [t for t in load(study).trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(used) == 1 and used[0].user_attrs.get(Key.BASELINE)
    assert wait_gone(name) == []
    # Run again as it says: the other configurations are tried, and when they fail too (every
    # start here runs out of memory at 0.98) the study stops after a few, not after n_trials.
    done = subprocess.run([*spectune_command(), "tune", str(study), "--no-report"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 7, done.stderr
    assert "(stopped: starts-failed)" in done.stdout
    assert "the setup (model, GPUs, the server command) is what fails" in done.stderr
    used = [t for t in load(study).trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(used) == 1 + MAX_FAILED_STARTS
    # … and a third run (the operator may have fixed the target) tries again rather than stopping
    # on the earlier failures
    again = subprocess.run([*spectune_command(), "tune", str(study), "--no-report"],
                           capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 7 and "(stopped: starts-failed)" in again.stdout, again.stderr
    used = [t for t in load(study).trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(used) == 1 + 2 * MAX_FAILED_STARTS
    assert wait_gone(name) == []


def test_a_port_in_use_stops_tune_before_any_trial_and_leaves_nothing_behind(
        tmp_path: Path) -> None:
    """Two `tune` runs against a port another program holds: each stops at preflight with one line
    (exit 3); no trial is FAIL/interrupted, none is re-queued, nothing runs."""
    import socket

    name = f"e2e-port-{RUN}"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        study = make_study(tmp_path, name, n_trials=2)
        study.write_text(re.sub(r"^port = 0 .*$", f"port = {port}", study.read_text(), flags=re.M))
        waiting = []
        for _ in range(2):
            proc = tune(study, "--no-report")
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 3, err
            assert f"port {port} on 127.0.0.1 is already in use" in err and "Traceback" not in err
            trials = load(study).trials
            assert not [t for t in trials if t.state != optuna.trial.TrialState.WAITING], \
                [(t.number, t.state) for t in trials]
            waiting.append(len(trials))
        assert waiting[0] == waiting[1]  # the second run queued nothing more
    assert wait_gone(name) == []
    # what waits in the queue shows the flags it will propose, not "none" and "–"
    shown = subprocess.run([*spectune_command(), "trial", "0", str(study)], capture_output=True,
                           text=True, timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr
    baseline = load_study_file(study).baseline
    assert "flags requested (the proposal):\n" in shown.stdout
    assert all(f"{flag} {value}" in shown.stdout for flag, value in baseline.items())
