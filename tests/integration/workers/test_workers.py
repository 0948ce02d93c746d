"""Several `spectune worker` processes on one PostgreSQL study, each with its own simulated host.

The acceptance test of issue 8: 3 workers on 3 simulated hosts (each host its own simulator process
on its own 127.0.0.1 port), 18 trials (30 in the issue; 18 keep the suite's time and still give each
worker several), one worker SIGKILLed mid-trial → 18 measured, none measured twice, none lost, none
left RUNNING; the killed worker's trial is re-run by another and its host is reclaimed by a new
worker.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.e2e.test_tune import load, make_study, servers_of, wait_gone
from tests.helpers import spectune_command
from tuner.store.keys import Key
from tuner.store.opening import StudyNotFound
from tuner.workers.leases import LeaseTable

HOSTS = ("sim-a", "sim-b", "sim-c")
TRIALS = 18


def shared_study(tmp_path: Path, name: str, url: str, *, n_trials: int,
                 hosts: tuple[str, ...] = HOSTS) -> Path:
    path = make_study(tmp_path, name, n_trials=n_trials)
    text = path.read_text()
    text = text.replace("[study]\n", f'[study]\nstorage = "{url}"\nheartbeat_interval = '
                                     '1\nheartbeat_grace = 4\n', 1)
    text = text.replace('timeout = "20m"', 'timeout = "10m"')
    # GP's torch start-up would dominate on small CI boxes
    text = text.replace('sampler = "auto"', 'sampler = "tpe"')
    hosts_line = ", ".join(f'"{h}"' for h in hosts)
    text = text.replace("port = 0 ", f"hosts = [{hosts_line}]\nport = 0 ")
    path.write_text(text)
    return path


class Worker:
    """A `spectune worker` process whose output goes to files: a worker blocked on a full pipe would
    stall mid-trial with its heartbeat still beating, and the others would wait for it forever."""

    def __init__(self, study: Path, *args: str) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        base = study.parent / f"worker-{uuid.uuid4().hex[:8]}"
        self.out, self.err = base.with_suffix(".out"), base.with_suffix(".err")
        # the child keeps its own descriptors
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen([*spectune_command(), "worker", str(study), *args],
                                         stdout=out,
                                         stderr=err, text=True, env=env, cwd=study.parent)

    def communicate(self, timeout: float) -> tuple[str, str]:
        self.proc.wait(timeout=timeout)
        return self.out.read_text(), self.err.read_text()

    def __getattr__(self, name: str) -> object:
        return getattr(self.proc, name)


def worker(study: Path, *args: str) -> Worker:
    return Worker(study, *args)


def server_pid(study: Path, name: str, host: str) -> int | None:
    pid_file = study.parent / ".spectune" / name / "logs" / host / "server.pid"
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def kill_group(pid: int | None) -> None:
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


@pytest.mark.timeout(900)
def test_three_workers_one_killed_mid_trial(tmp_path: Path, pg_url: str) -> None:
    # servers_of(name) must not see another run's leftovers
    name = f"workers-kill-{uuid.uuid4().hex[:6]}"
    study = shared_study(tmp_path, name, pg_url, n_trials=TRIALS)
    started = time.monotonic()
    procs = {host: worker(study, "--host", host) for host in HOSTS}
    try:
        # Kill sim-b's worker while one of its trials is running (after the baseline, so several
        # trials exist).
        victim_trial = None
        deadline = time.monotonic() + 240  # generous: a busy machine starts workers slowly
        while victim_trial is None and time.monotonic() < deadline:
            time.sleep(0.2)
            try:
                trials = load(study).get_trials(deepcopy=False)
            except StudyNotFound:
                continue
            if sum(bool(t.user_attrs.get(Key.COUNTS)) for t in trials) < 4:
                continue
            busy = [t.number for t in trials if t.state == TrialState.RUNNING
                    and t.user_attrs.get(Key.HOST) == "sim-b"
                    and Key.CONFIG_KEY in t.user_attrs]
            # sim-b's worker has proposed its configuration and is deploying or measuring it
            if busy:
                victim_trial = _kill_if_mid_trial(procs["sim-b"], study, "sim-b")
        assert victim_trial, "no moment to kill a worker mid-trial"
        # its simulator outlives it, as a GPU server would
        orphan = server_pid(study, name, "sim-b")
        # A new worker for the dead worker's host waits for the lease to lapse, then reclaims it
        # (and stops the orphaned server — ours, by its pid file and SPECTUNE_STUDY marker).
        procs["sim-b"] = worker(study, "--host", "sim-b")
        outputs = {host: proc.communicate(timeout=400) for host, proc in procs.items()}
        # before the clean-up below could stop it
        orphan_left = orphan is not None and _alive(orphan)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
        for host in HOSTS:  # a failed run must not leave simulators behind
            kill_group(server_pid(study, name, host))
    elapsed = time.monotonic() - started
    for host, proc in procs.items():
        assert proc.returncode == 0, f"{host}: {outputs[host][1][-3000:]}"
    s = load(study)
    trials = s.get_trials(deepcopy=False)
    counted = [t for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get(Key.COUNTS)]
    # none lost, and no overshoot from three workers finishing at once
    assert len(counted) == TRIALS
    keys = [t.user_attrs[Key.CONFIG_KEY] for t in counted]
    assert len(keys) == len(set(keys)), "a configuration was measured twice"
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    # The killed worker's trial went stale and was re-run by another worker with the same
    # parameters.
    stale = [t for t in trials
             if t.state == TrialState.FAIL and t.user_attrs.get("outcome") != "taken"]
    assert [t.number for t in stale] == victim_trial, \
           "the killed worker's trial was not failed (or another was)"
    retried = [t for t in trials if t.system_attrs.get("failed_trial") in {f.number for f in stale}]
    assert retried and all(t.state == TrialState.COMPLETE for t in retried)
    # (the kill may land before every parameter was suggested: the ones that were are kept)
    assert all(trials[t.system_attrs["failed_trial"]].params.items() <= t.params.items()
               for t in retried)
    # The baseline ran once, first, not once per worker.
    baselines = [t for t in trials if t.user_attrs.get("baseline")
                 and t.system_attrs.get("failed_trial") is None]
    assert [t.number for t in baselines] == [0]
    # Every host measured a share (the work was spread), and the hosts are free again.
    by_host = {host: sum(t.user_attrs.get(Key.HOST) == host for t in counted) for host in HOSTS}
    assert all(n >= 3 for n in by_host.values()), by_host
    # The replacement got the dead worker's host: by waiting for its lease to lapse, or — when this
    # machine was slow to start it — by finding the lease already lapsed. Which of the two is a
    # matter of timing.
    assert "on host sim-b" in outputs["sim-b"][1]
    assert LeaseTable(pg_url, name).leases() == []
    assert not orphan_left
    assert wait_gone(name) == []
    print(f"3 workers, {TRIALS} trials, one killed: {elapsed:.1f} s")


def _kill_if_mid_trial(proc: Worker, study: Path, host: str) -> list[int] | None:
    """SIGKILL the worker if, frozen, it holds a running trial; else let it go on (None).

    The trial seen running a moment ago may have ended since. A worker frozen by SIGSTOP writes
    nothing more, so what is read while it is stopped is what its death leaves behind: the kill
    lands mid-trial, or not at all, whatever the machine's load."""
    proc.send_signal(signal.SIGSTOP)
    running = [t.number for t in load(study).get_trials(deepcopy=False)
               if t.state == TrialState.RUNNING and t.user_attrs.get(Key.HOST) == host]
    if not running:
        proc.send_signal(signal.SIGCONT)
        return None
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    return running


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_workers_refuse_sqlite_and_a_second_worker_on_a_host(tmp_path: Path, pg_url: str) -> None:
    sqlite = make_study(tmp_path, "workers-sqlite")
    proc = worker(sqlite)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "workers share a study through PostgreSQL or MySQL" in err and "Traceback" not in err

    name = f"workers-busy-{uuid.uuid4().hex[:6]}"
    study = shared_study(tmp_path, name, pg_url, n_trials=50, hosts=("only",))
    first = worker(study)
    try:
        deadline = time.monotonic() + 240  # generous: a busy machine starts workers slowly
        while not servers_of(name) and time.monotonic() < deadline:
            time.sleep(0.2)
        second = worker(study, "--host", "only")
        _, err = second.communicate(timeout=60)
        assert second.returncode == 5, err
        assert re.search(r"leased by a live worker: only \(worker \S+:\d+:\w+", err)
        assert first.poll() is None  # the first worker is unaffected
        unknown = worker(study, "--host", "nope")
        _, err = unknown.communicate(timeout=60)
        assert unknown.returncode == 2 and "--host 'nope' is not a host of study" in err
    finally:
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=60)
    assert first.returncode == 143, err
    assert wait_gone(name) == []
    s = load(study)
    assert not [t for t in s.trials if t.state == TrialState.RUNNING]


@pytest.mark.parametrize("sampler", ["tpe", "gp"])
def test_parallel_proposals_do_not_collapse(sampler: str) -> None:
    """With trials in flight (RUNNING), the next proposals avoid them: TPE's constant liar, GP's
    pending points."""
    if sampler == "gp":
        pytest.importorskip("torch")
    from tuner.search.samplers import make_sampler

    study = optuna.create_study(direction="maximize", sampler=make_sampler(sampler, seed=3))
    for i in range(12):
        trial = study.ask()
        x, y = trial.suggest_int("x", 0, 20), trial.suggest_int("y", 0, 20)
        study.tell(trial, -((x - 13) ** 2) - (y - 7) ** 2 + i * 0)
    pending = []
    for _ in range(4):  # four workers ask before any of them tells
        trial = study.ask()
        pending.append((trial.suggest_int("x", 0, 20), trial.suggest_int("y", 0, 20)))
    assert len(set(pending)) == 4, pending
