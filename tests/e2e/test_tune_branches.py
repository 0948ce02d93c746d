"""`spectune tune` over the whole speculative choice on the simulator, end to end: EAGLE-3 with a
static tree, EAGLE-3 with SGLang's adaptive steps, n-gram and no speculation in one space; `spectune
best` then states the tuned static winner against SGLang's adaptive mode and against "off", with
intervals."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import optuna
import pytest

from tests.helpers import STUDIES, spectune_command
from tuner.store.keys import Key
from tuner.store.opening import open_existing_study
from tuner.study.load import load_study_file

RUN = os.getpid()


def make_study(tmp_path: Path) -> Path:
    """The second demo, small and fast: steps and top-k fixed (five trials: the baseline, one
    designed point, one start per other branch), short phases at time scale 400."""
    text = (STUDIES / "speculation-branches.toml").read_text()
    text = text.replace('name = "speculation-branches-demo"', f'name = "e2e-branches-{RUN}"')
    text = text.replace("n_trials = 14", "n_trials = 5")
    text = re.sub(r"^time_scale = [0-9.]+", "time_scale = 400.0", text, flags=re.M)
    for flag in ("speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens"):
        text = re.sub(rf"^{flag} = .*$\n", "", text, flags=re.M)
    text = text.replace("[search]",
                        "[search]\nspeculative-num-draft-tokens = { min = 4, max = 12, step = 4 }")
    text = text.replace('speculative-draft-model-path = "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"',
                        'speculative-draft-model-path = '
                        '"lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"\n'
                        "speculative-num-steps = 3\nspeculative-eagle-topk = 1")
    text = text.replace("speculative-num-draft-tokens = 4\n", "")
    text = text.replace('speculative-algorithm = "EAGLE3"', 'speculative-algorithm = "EAGLE3"\n'
                        "speculative-num-draft-tokens = 4")
    text = text.replace("{ concurrency = 1, requests = 8, warmup = 1 }",
                        "{ concurrency = 1, requests = 2, warmup = 1 }")
    text = text.replace("{ concurrency = 64, requests = 128, warmup = 8 }",
                        "{ concurrency = 64, requests = 64, warmup = 4 }")
    text = text.replace("max_tokens = 256", "max_tokens = 64")
    path = tmp_path / "branches.toml"
    path.write_text(text)
    return path


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*spectune_command(), *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=dict(os.environ, PYTHONUNBUFFERED="1"))


@pytest.mark.slow
def test_a_study_over_four_branches_answers_tuned_static_vs_adaptive_vs_off(tmp_path: Path) -> None:
    study = make_study(tmp_path)
    # confirmation has its own tests
    tuned = run("tune", str(study), "--confirm", "0", cwd=tmp_path)
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    stored = open_existing_study(load_study_file(study))
    measured = [t for t in stored.trials if t.state == optuna.trial.TrialState.COMPLETE
                and t.user_attrs.get(Key.COUNTS)]
    assert len(measured) == 5
    # Each branch's first measured trial: the baseline, then each branch's start (the adaptive
    # one is the reference run). The sampler's own fifth trial may land on any branch.
    by_choice: dict[str, optuna.trial.FrozenTrial] = {}
    for trial in measured:
        by_choice.setdefault(trial.params["speculative-algorithm"], trial)
    assert set(by_choice) >= {"EAGLE3", "EAGLE3-adaptive", "NGRAM", "off"}  # every branch measured
    flags = {c: dict(t.user_attrs[Key.CONFIG]["flags"]) for c, t in by_choice.items()}
    assert flags["EAGLE3-adaptive"]["--speculative-adaptive"] is True
    assert "--speculative-num-steps" not in flags["EAGLE3-adaptive"]
    assert "--speculative-draft-model-path" not in flags["NGRAM"]
    assert not any(f.startswith("--speculative-") for f in flags["off"])
    assert set(by_choice["NGRAM"].params) == {"speculative-algorithm",
                                              "speculative-num-draft-tokens.pos",
                                              "speculative-ngram-max-bfs-breadth.idx",
                                              "mem-fraction-static.k",
                                              "cuda-graph-max-bs-decode.idx"}
    assert by_choice["EAGLE3-adaptive"].user_attrs[Key.REFERENCE] == "adaptive"
    # EAGLE-3 at 3 steps is faster than speculation off at C=1 on this profile (simulator,
    # docs/simulator.md)
    c1 = {c: t.user_attrs[Key.PHASES]["1"]["per_request_tok_s_mean"] for c, t in by_choice.items()}
    assert c1["EAGLE3"] > 1.5 * c1["off"]

    best = run("best", str(study), cwd=tmp_path)
    assert best.returncode == 0, best.stderr
    notes = best.stderr
    static = re.search(r"tuned static winner: trial (\d+), score [0-9.]+ \[[0-9.]+, [0-9.]+\]",
                       notes)
    assert static, notes
    assert re.search(r"vs SGLang's adaptive steps \(--speculative-adaptive\) \(trial \d+, score "
                     r"[0-9.]+ \[.*\]\): the tuned static winner is [+-][0-9.]+ % \[[+-][0-9.]+ %, "
                     r"[+-][0-9.]+ %\]",
                     notes), notes
    off = re.search(
        r"vs speculation off \(trial \d+, score [0-9.]+ \[.*\]\): the tuned static winner is "
        r"\+([0-9.]+) % \[", notes)
    assert off and float(off.group(1)) > 20, notes

    report = run("report", str(study), "-o", str(tmp_path / "report"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "## Compared with SGLang's own choices" in summary
    assert "- vs speculation off (trial" in summary and "- vs SGLang's adaptive steps" in summary
