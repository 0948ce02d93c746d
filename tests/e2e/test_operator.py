"""The overnight operator's experience through the real CLI: the live view in a pseudo-terminal, the
final answer, resuming, fast and spoken failures (port in use, database down), and reading one trial
back."""

from __future__ import annotations

import os
import pty
import re
import select
import socket
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_tune import RUN, make_study
from tests.helpers import spectune_command
from tuner.core.net import free_port
from tuner.study.load import load_study_file

pytestmark = pytest.mark.timeout(400)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def in_pty(*args: str, cwd: Path) -> tuple[int, str]:
    """Run spectune with a pseudo-terminal as its stdout and stderr (what an operator watching it
    sees)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*spectune_command(), *args], stdout=follower, stderr=follower,
                            stdin=subprocess.DEVNULL,
                            cwd=cwd, env=dict(os.environ, COLUMNS="160", TERM="xterm"))
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 300)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=60), ANSI.sub("", b"".join(chunks).decode(errors="replace"))


def test_live_view_shows_flags_then_resume_keeps_best_and_the_answer_has_context(
        tmp_path: Path) -> None:
    study = make_study(tmp_path, f"operator-{RUN}", n_trials=3)
    # Without the confirmation stage, whose confirmed score would replace the study's own in the
    # answer (tests/e2e/test_tune_confirm.py covers it): here the live best and its resume are what
    # is checked.
    code, out = in_pty("tune", str(study), "--confirm", "0", cwd=tmp_path)
    assert code == 0, out
    # The flags of each trial survive (Rich markup used to eat the brackets): the baseline's,
    # measured first.
    baseline = load_study_file(study).baseline
    steps, topk = baseline["--speculative-num-steps"], baseline["--speculative-eagle-topk"]
    assert re.search(rf"#0 measured .*\[num-steps={steps} eagle-topk={topk}", out), out
    assert "Trial" not in out or "failed with value" not in out  # Optuna's own warnings stay out
    # The final answer: per-phase change against the baseline, latencies, target, database, logs,
    # report.
    assert re.search(r"C=1 per-request tok/s\s+[\d.]+(?: ± [\d.]+)?\s+[\d.]+(?: ± "
                     r"[\d.]+)?\s+[+-]\d+ %", out), out
    assert "TTFT p50" in out and "ITL mean" in out
    # every latency shown carries its 95 % interval (a bootstrap over the phase's requests)
    for label in ("TTFT p50", "TTFT p99", "ITL mean"):
        assert re.search(rf"C=\d+ {label} ms\s+[\d.]+ ± [\d.]+\s+[\d.]+ ± [\d.]+", out), out
    assert "target: the server started for the last trial was stopped" in out
    assert "database: sqlite:///" in out and "server logs: " in out
    report = tmp_path / f"{study.stem}-report" / "index.html"
    assert f"report: {report}" in out and report.exists()
    assert (report.parent / "summary.md").exists() and (report.parent / "trials.csv").exists()
    stored_best = re.search(r"best: trial \d+, score ([\d.]+)", out)
    assert stored_best
    # Resume for one more trial: the live best starts at the stored best, never at "–".
    code, again = in_pty("tune", str(study), "--n-trials", "4", "--confirm", "0", cwd=tmp_path)
    assert code == 0, again
    assert "best –" not in again and f"best {stored_best.group(1)}" in again, again
    assert "ETA " in again


def test_an_objective_change_resumes_and_says_it_reranks(tmp_path: Path) -> None:
    study = make_study(tmp_path, f"objective-{RUN}", n_trials=2)
    assert subprocess.run([*spectune_command(), "tune", str(study), "--no-report"],
                          capture_output=True, timeout=300, cwd=tmp_path).returncode == 0
    text = study.read_text().replace("weights = { c1 = 0.5, c64 = 0.5 }",
                                     "weights = { c1 = 0.8, c64 = 0.2 }")
    study.write_text(text)
    done = subprocess.run([*spectune_command(), "tune", str(study), "--no-report"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "[objective] has changed" in done.stderr \
           and "re-ranked under the new objective" in done.stderr
    # Piped output is not wrapped at 80 columns: each summary line is one line.
    assert any(line.startswith("database: ") and line.endswith("lists every trial)") for line in
               done.stdout.splitlines()), done.stdout


def test_a_port_in_use_fails_at_once_without_retries(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        study = make_study(tmp_path, f"port-{RUN}", n_trials=1)
        study.write_text(re.sub(r"^port = 0.*$", f"port = {port}", study.read_text(), flags=re.M))
        done = subprocess.run([*spectune_command(), "tune", str(study)], capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in done.stderr
    assert "trying again" not in done.stderr  # waiting cannot free a port another program holds


def test_an_unreachable_database_is_announced_and_retried_aloud(tmp_path: Path) -> None:
    study = make_study(tmp_path, f"pg-{RUN}", n_trials=1)
    url = f"postgresql+psycopg://tuner:s3cret@127.0.0.1:{free_port()}/spectune"
    study.write_text(study.read_text().replace("n_trials = 1", f'n_trials = 1\nstorage = "{url}"'))
    done = subprocess.run([*spectune_command(), "tune", str(study)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("connecting to postgresql+psycopg://tuner:***@127.0.0.1:"), lines
    assert any("trying again in 1 s" in line for line in lines), lines
    assert "s3cret" not in done.stderr
