"""The installed console script on a stored study: `tune` refuses a changed [benchmark]; `best`
answers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import optuna

from tests.helpers import spectune_command


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*spectune_command(), *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd)


def test_tune_refuses_to_resume_a_study_whose_benchmark_changed(stored_study: Path) -> None:
    """A changed [benchmark] makes new trials incomparable (a changed [objective] only re-ranks:
    tests/e2e/test_operator.py)."""
    storage = f"sqlite:///{stored_study.with_suffix('.db')}"
    before = optuna.load_study(study_name="demo", storage=storage)
    n_before, attrs_before = len(before.trials), dict(before.user_attrs)
    stored_study.write_text(stored_study.read_text().replace("max_tokens = 256",
                                                             "max_tokens = 128"))
    result = _run("tune", str(stored_study), cwd=stored_study.parent)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "[benchmark] has changed since study 'demo' began" in lines[0]
    assert "Traceback" not in result.stderr
    after = optuna.load_study(study_name="demo", storage=storage)
    # nothing ran, nothing written
    assert len(after.trials) == n_before and after.user_attrs == attrs_before
    # The stored study still answers, with a warning.
    best = _run("best", str(stored_study), "--weights", "c1=0.9,c64=0.1", cwd=stored_study.parent)
    assert best.returncode == 0 and best.stdout.startswith("python3 -m sglang.launch_server")
    assert "warning:" in best.stderr and "under weights c1=0.9,c64=0.1" in best.stderr
