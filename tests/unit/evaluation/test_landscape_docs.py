"""A landscape written only from docs/benchmarks.md plugs in: the file the docs print (a
``@dataclass`` under ``from __future__ import annotations``, its own study beside it, its own
objective and baseline, every failure class) runs through the public API and through the bench's
``--landscape file.py:factory`` from its folder."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from bench.sample_efficiency import make_landscape
from tests.helpers import REPO, STUDIES
from tuner.core.errors import SpectuneError
from tuner.evaluation.landscape import evaluate_search
from tuner.evaluation.landscape_plugin import (
    LandscapeError,
    landscape_fingerprint,
    load_landscape,
    study_of,
)
from tuner.evaluation.reference_search import found_so_far, random_search, sweep_search
from tuner.run.measurement import BadMeasurement
from tuner.store.record import Outcome, TrialRecord
from tuner.study.load import load_study_file
from tuner.targets.base import FailureCause


def documented_example() -> str:
    text = (REPO / "docs" / "benchmarks.md").read_text()
    match = re.search(r"<!-- landscape-example: my_landscape.py -->\n```python\n(.*?)```", text,
                      re.S)
    assert match, "docs/benchmarks.md lost its landscape example"
    return match.group(1)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    home = tmp_path_factory.mktemp("my-models")
    (home / "my_landscape.py").write_text(documented_example())
    shutil.copy(STUDIES / "simulated.toml", home / "my-study.toml")
    return home


def test_the_documented_landscape_carries_its_study_objective_and_baseline(folder: Path) -> None:
    factory, module = load_landscape(str(folder / "my_landscape.py") + ":landscape")
    land = factory()
    spec = study_of(land)
    # relative to the landscape's file, not the working directory
    assert spec.path == folder / "my-study.toml"
    assert spec.objective.weights == {1: 0.7, 64: 0.3} \
           and spec.baseline["--speculative-num-steps"] == 2
    assert landscape_fingerprint(land, module) == "version:tree-1"
    truth = land.true_scores()
    assert truth[evaluate_search(None, land, n_trials=1,
                                 seed=0).best_config.key()] == pytest.approx(1.0)

    auto = evaluate_search(None, land, n_trials=12, seed=0)
    sweep = sweep_search(None, land, n_trials=12, seed=0)
    rand = random_search(None, land, n_trials=24, seed=3)
    curves = [found_so_far(r, land, 12) for r in (auto, sweep)]
    assert all(len(c) == 12 and c == sorted(c) and 0 < c[-1] <= 1.0 for c in curves)
    assert curves[0][-1] >= 0.95
    records = [TrialRecord.from_stored(t) for r in (auto, sweep, rand) for t in r.trials]
    causes = {(r.outcome, r.failure_class, r.failure_cause) for r in records
              if r.outcome is not Outcome.MEASURED}
    assert (Outcome.RUN_FAILED, "crashed-under-load", FailureCause.DECODE_OOM) in causes
    assert (Outcome.RUN_FAILED, "wrong-output", FailureCause.WRONG_OUTPUT) in causes
    assert (Outcome.DEPLOY_FAILED, "out-of-memory", FailureCause.GRAPH_CAPTURE_OOM) in causes
    assert any(o is Outcome.DEPLOY_FAILED and c == "invalid-flags" for o, c, _ in causes)
    picks = [r.best_config for r in (auto, sweep, rand)]
    assert all(p is not None and p.key() in truth for p in picks)  # never a failing configuration


def test_the_bench_runs_it_from_its_folder_with_a_relative_study_and_caches_its_truth(
        folder: Path, tmp_path: Path) -> None:
    (folder / "other").mkdir(exist_ok=True)
    shutil.copy(folder / "my-study.toml", folder / "other" / "renamed.toml")
    run = subprocess.run([sys.executable, str(REPO / "bench" / "sample_efficiency.py"),
                          "--landscape",
                          "my_landscape.py:landscape", "--studies", "other/renamed.toml", "--seeds",
                          "1", "--budget", "8", "--samplers", "auto,sweep", "--truth-cache",
                          str(tmp_path)],
                         cwd=folder, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    assert "| renamed | auto |" in run.stdout and "| renamed | sweep |" in run.stdout
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_a_truth_is_keyed_on_the_modules_a_landscape_imports(tmp_path: Path) -> None:
    (tmp_path / "helper_speed_27.py").write_text("SPEED = 1.0\n")
    (tmp_path / "imports_helper.py").write_text(
        "from __future__ import annotations\n\nfrom helper_speed_27 import SPEED\n\n\n"
        "class Land:\n    study = 'my-study.toml'\n\n\ndef landscape() -> Land:\n    return "
        "Land()\n")
    sys.path.insert(0, str(tmp_path))
    try:
        factory, module = load_landscape(str(tmp_path / "imports_helper.py") + ":landscape")
        before = landscape_fingerprint(factory(), module)
        (tmp_path / "helper_speed_27.py").write_text("SPEED = 2.0\n")
        assert landscape_fingerprint(factory(), module) != before
        with pytest.raises(SpectuneError, match=r"my-study\.toml: file not found"):
            study_of(factory())  # names a study file that is not beside it: a one-line error
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("helper_speed_27", None)


def test_a_landscape_file_that_fails_to_load_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("from __future__ import annotations\n\nx = (\n")
    with pytest.raises(LandscapeError, match=r"broken\.py: SyntaxError"):
        load_landscape(str(tmp_path / "broken.py") + ":landscape")
    with pytest.raises(LandscapeError, match="cannot import no_such_landscape_module"):
        load_landscape("no_such_landscape_module:landscape")


NAN_LANDSCAPE = '''from __future__ import annotations

from tuner.evaluation.landscape import MeasuredLandscape


class Steps:
    def deploy(self, config):
        self.steps = int(config.get("--speculative-num-steps"))
        return {}

    def measure(self, phase_index):
        speed = float("nan") if self.steps == 3 else 100.0 + 5 * self.steps
        return {"per_request_tok_s_mean": speed, "aggregate_tok_s": 30 * speed, "error_rate": 0.0}


def landscape():
    return MeasuredLandscape("my-study.toml", lambda seed: Steps(), version="nan-1")
'''


def test_a_landscape_that_answers_nan_is_a_one_line_error_in_the_api_and_the_bench(
        folder: Path, tmp_path: Path) -> None:
    (folder / "nan_landscape.py").write_text(NAN_LANDSCAPE)
    factory, _ = load_landscape(str(folder / "nan_landscape.py") + ":landscape")
    with pytest.raises(BadMeasurement, match=r"phase C=1 per_request_tok_s_mean = nan"):
        sweep_search(None, factory(), n_trials=6, seed=0)  # steps 1, 2, then 3
    run = subprocess.run([sys.executable, str(REPO / "bench" / "sample_efficiency.py"),
                          "--landscape", "nan_landscape.py:landscape", "--seeds", "1", "--budget",
                          "4", "--samplers", "auto", "--truth-cache", str(tmp_path)],
                         cwd=folder, capture_output=True, text=True, timeout=180)
    assert run.returncode != 0
    assert "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith(
        "measurer: phase C=1 per_request_tok_s_mean = nan: every figure must be a finite number")
    assert not list(tmp_path.glob("*.json"))  # no truth cached from a broken measurer


BARE_MEASURER = '''from __future__ import annotations


class Steps:
    def deploy(self, config):
        self.steps = int(config.get("--speculative-num-steps"))
        return {}

    def measure(self, phase_index):
        speed = 100.0 + 5 * self.steps
        return {"per_request_tok_s_mean": speed, "aggregate_tok_s": 30 * speed, "error_rate": 0.0}


def measurer(spec):
    return Steps()
'''


def test_a_factory_that_returns_a_bare_measurer_is_its_own_truth(folder: Path) -> None:
    """docs/benchmarks.md: FACTORY may return "a bare deterministic Measurer, taken as its own
    truth" — the landscape made of it hands out that measurer, not itself."""
    (folder / "bare_measurer.py").write_text(BARE_MEASURER)
    factory, _ = load_landscape(str(folder / "bare_measurer.py") + ":measurer")
    spec = load_study_file(folder / "my-study.toml")
    land, searched = make_landscape(spec, factory, 0.02)
    assert searched.path == spec.path
    assert callable(getattr(land.measurer(0), "deploy", None))
    truth = land.true_scores()
    steps = {key: dict(json.loads(key)["flags"])["--speculative-num-steps"] for key in truth}
    # its own truth's optimum: the deepest tree
    assert steps[max(truth, key=truth.__getitem__)] == max(steps.values())
    result = sweep_search(searched, land, n_trials=8, seed=0)
    assert found_so_far(result, land, 8)[-1] == pytest.approx(1.0)


def test_two_factories_of_one_module_have_two_truths() -> None:
    # bench/landscapes/expert_traffic.py: one model class, two sets of numbers — the same sources
    from bench.landscapes import expert_traffic

    spec = load_study_file(REPO / "bench" / "studies" / "qwen-seed-space.toml")
    one = landscape_fingerprint(expert_traffic.landscape(spec), expert_traffic, spec=spec)
    other = landscape_fingerprint(expert_traffic.wide_close(spec), expert_traffic, spec=spec)
    assert one != other
    assert landscape_fingerprint(expert_traffic.landscape(spec), expert_traffic, spec=spec) == one
    assert (landscape_fingerprint(expert_traffic.landscape(spec), expert_traffic)
            == landscape_fingerprint(expert_traffic.wide_close(spec), expert_traffic))  # sources
