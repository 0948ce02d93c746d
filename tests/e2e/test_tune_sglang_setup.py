"""`spectune tune` against a `local` target whose SGLang cannot judge anything — it sees no GPU, or
a module it imports is missing — stops once, at preflight, with exit 3 and one line naming the cause
and the fix; no trial is stored as rejected and nothing suggests deploying a "best". Where the study
allows it, spectune's rules judge instead (one line says so) and the study runs. The SGLang is the
stand-in package (tests/integration/targets/ standin_sglang) with a broken installation switched on,
run by the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from tests.helpers import spectune_command
from tuner.core.net import free_port
from tuner.store.opening import open_existing_study
from tuner.store.record import Outcome, TrialRecord
from tuner.study.load import load_study_file

ROOT = Path(__file__).parents[2]
STANDIN = ROOT / "tests" / "integration" / "targets" / "standin_sglang"

STUDY = """
[study]
name = "broken-sglang-{run}"
n_trials = 2
seed = 3

[target]
kind = "local"
command = {command}
port = {port}
startup_timeout = "1m"
{extra}

[server.flags]
model-path = "meta-llama/Llama-3.1-8B-Instruct"
speculative-algorithm = "EAGLE3"
speculative-draft-model-path = "d"

[search]
speculative-num-steps = {{ min = 1, max = 4 }}
speculative-eagle-topk = {{ choices = [1, 2] }}
speculative-num-draft-tokens = {{ min = 2, max = 8 }}

[baseline]
speculative-num-steps = 3
speculative-eagle-topk = 1
speculative-num-draft-tokens = 4

[benchmark]
api = "chat"
dataset = "builtin"
max_tokens = 16
phases = [{{ concurrency = 1, requests = 2, warmup = 0 }}]

[objective]
weights = {{ c1 = 1.0 }}
"""


def study_file(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "broken.toml"
    path.write_text(STUDY.format(run=os.getpid(),
                                 command=json.dumps([sys.executable, "-m", "sglang.launch_server"]),
                                 extra=extra, port=free_port()))
    return path


def tune(path: Path, broken: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STANDIN), str(ROOT)]),
           "STANDIN_SGLANG_BROKEN": broken,
           "PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                   # SGLang is shown no GPU
                                   if not (Path(p) / "nvidia-smi").exists())}
    return subprocess.run([*spectune_command(), "tune", str(path), "--confirm", "0", "--no-report"],
                          env=env, capture_output=True, text=True, timeout=240, cwd=path.parent)


def stored(path: Path) -> list[TrialRecord]:
    try:
        study = open_existing_study(load_study_file(path))
    except Exception:
        return []
    return [TrialRecord.from_stored(t) for t in study.get_trials(deepcopy=False)]


@pytest.mark.slow
@pytest.mark.parametrize(("broken", "cause"), [
    ("no-accelerator", "SGLang sees no GPU"),
    ("no-sgl-kernel", "a module SGLang imports is missing (sgl_kernel)"),
])
def test_sglang_that_cannot_judge_stops_tune_once_at_preflight(tmp_path: Path, broken: str,
                                                               cause: str) -> None:
    path = study_file(tmp_path)
    done = tune(path, broken)
    assert done.returncode == 3, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(
        f"error: SGLang on this machine cannot judge configurations: {cause} (")
    assert "[target] when_sglang_cannot_judge" in errors[0]
    assert "Traceback" not in done.stderr and "rejected" not in done.stderr + done.stdout
    assert "deploy --best" not in done.stdout + done.stderr
    records = stored(path)
    assert not [r for r in records
                if r.outcome is Outcome.REJECTED or r.state == optuna.trial.TrialState.COMPLETE]


@pytest.mark.slow
def test_where_the_study_allows_it_the_rules_judge_after_one_line(tmp_path: Path) -> None:
    path = study_file(tmp_path, 'when_sglang_cannot_judge = "rules"')
    done = tune(path, "no-accelerator")
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "cannot judge configurations" in line]
    assert len(said) == 1 and "spectune's own rules judge the configurations instead" in said[0]
    records = stored(path)
    assert sum(r.is_measured for r in records) == 2
    assert not [r for r in records if r.outcome is Outcome.REJECTED and r.rejected_by is not None
                and r.rejected_by.value == "sglang"]
