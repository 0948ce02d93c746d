"""The fault-injection suite's tools: a short simulated study, a tuner run with faults at named code
points (``SPECTUNE_FAULT``, tuner/core/faults.py), and the checks every case ends with — the
documented exit code, one line of error, no server of the study left, and a study that resumes to
exactly ``n_trials`` measured trials with none counted twice.

Timing-free: a case waits for named code points or for the tuner's own exit, under generous
deadlines.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from tests.faults.forkserver import ForkServer
from tests.helpers import STUDIES, spectune_command
from tests.postgres import postgres_server
from tuner.store.keys import Key
from tuner.store.opening import open_existing_study
from tuner.study.load import load_study_file
from tuner.targets.process_group import marked_processes

RUN = os.getpid()
DEADLINE_S = 420  # a loaded CI machine; a hang shows as this deadline passing


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def forks() -> Iterator[ForkServer]:
    """``spectune`` forked from a process that has imported it (tests/faults/forkserver.py)."""
    server = ForkServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def measured(forks: ForkServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny study's database with two measured trials, for cases to copy
    (tests/faults/quick.py)."""
    from tests.faults.quick import make_measured

    return make_measured(forks, tmp_path_factory.mktemp("measured"))


def make_study(tmp_path: Path, name: str, *, n_trials: int = 3, storage: str | None = None,
               port: int | None = None) -> Path:
    text = (STUDIES / "simulated.toml").read_text()
    text = text.replace('name = "simulated-demo"', f'name = "{name}-{RUN}"')
    text = text.replace("n_trials = 12", f"n_trials = {n_trials}")
    if storage is not None:
        text = text.replace('seed = 7', f'seed = 7\nstorage = "{storage}"\nheartbeat_interval = 1\n'
                                       'heartbeat_grace = 3')
    text = re.sub(r"^time_scale = [0-9.]+", "time_scale = 400.0", text, flags=re.M)
    if port is not None:
        text = text.replace("port = 0 ", f"port = {port} ")
    text = re.sub(r'^deploy = .*$', 'deploy = "original"', text, flags=re.M)
    text = text.replace("{ concurrency = 1, requests = 8, warmup = 1 }",
                        "{ concurrency = 1, requests = 2, warmup = 1 }")
    text = text.replace("{ concurrency = 64, requests = 128, warmup = 8 }",
                        "{ concurrency = 64, requests = 16, warmup = 2 }")
    text = text.replace("max_tokens = 256", "max_tokens = 32")
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def study_name(study: Path) -> str:
    return load_study_file(study).study.name


def tune(study: Path, fault: str = "", *args: str, **env: str) -> subprocess.Popen[str]:
    """``spectune tune`` with a fault; without the confirmation stage unless ``args`` ask for it
    (``--confirm N`` comes later on the command line and wins): its restarts would triple each
    case's time."""
    full = dict(os.environ, PYTHONUNBUFFERED="1", SPECTUNE_FAULT=fault, **env)
    return subprocess.Popen([*spectune_command(), "tune", str(study), "--confirm", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full,
                            cwd=study.parent)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=DEADLINE_S)
    return proc.returncode, err


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def assert_one_line(err: str, *, contains: str) -> None:
    assert "Traceback" not in err, err
    lines = error_lines(err)
    assert len(lines) == 1 and contains in lines[0], err


def servers_of(name: str) -> list[int]:
    """Live processes started for study ``name`` (the targets' own marker scan)."""
    return marked_processes(name)


def wait_gone(name: str, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := servers_of(name)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def wait_for_server(name: str, proc: subprocess.Popen[str], timeout: float = DEADLINE_S) -> None:
    """Until a server of the study is up (a trial is under way)."""
    deadline = time.monotonic() + timeout
    while not servers_of(name) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert servers_of(name), "no trial started"


def load(study: Path) -> optuna.Study:
    return open_existing_study(load_study_file(study))


def assert_resumes_whole(study: Path, n_trials: int) -> optuna.Study:
    """A clean run after the fault ends the study: exactly ``n_trials`` measured, none twice, none
    RUNNING."""
    code, err = finish(tune(study))
    assert code == 0, err
    s = load(study)
    counted = [t for t in s.trials if t.state == optuna.trial.TrialState.COMPLETE
               and t.user_attrs.get(Key.COUNTS)]
    assert len(counted) == n_trials, \
           [(t.number, t.state, t.user_attrs.get(Key.OUTCOME)) for t in s.trials]
    keys = [t.user_attrs[Key.CONFIG_KEY] for t in counted]
    assert len(keys) == len(set(keys)), "a configuration was measured twice"
    assert not [t for t in s.trials if t.state == optuna.trial.TrialState.RUNNING]
    assert wait_gone(study_name(study)) == []
    return s
