"""Realistic stored studies in about a second: the product's loop with the simulator's ground truth.

The same path `spectune tune` takes (tuner/evaluation/landscape.py ``evaluate_search``: baseline
first, duplicates reused, failed starts and constraint violations stored as constraints, the C=64
skip), with the simulator's ground truth plus noise answering instead of a server.
Use the ``stored_study`` fixture by importing it into a conftest.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest

from tests.helpers import STUDIES
from tuner.evaluation.landscape import evaluate_search, simulator_landscape
from tuner.store.storage import make_storage
from tuner.study.load import load_study_file
from tuner.study.spec import SamplerName

#: A C=64 latency bound some of the simulator's configurations break, so studies have infeasible
#: trials.
TTFT_BOUND = "c64.ttft_p99_ms < 90"


def write_study_file(directory: Path, name: str = "demo", *, storage: str | None = None,
                     constraints: tuple[str, ...] = ("error_rate <= 0.01", TTFT_BOUND),
                     refused_backend: bool = False) -> Path:
    """The demo study, with a memory range that runs out at capture and ``constraints``.
    ``refused_backend`` also tunes the attention backend between fa3 and trtllm_mha, which SGLang
    refuses with top-k > 1: a third of that space is proposals that are never deployed (trials
    without a configuration)."""
    text = (STUDIES / "simulated.toml").read_text()
    if refused_backend:
        text = text.replace("cuda-graph-max-bs-decode = { choices = [32, 64, 128] }",
                            'cuda-graph-max-bs-decode = { choices = [32, 64, 128] }\n'
                            'attention-backend = { choices = ["fa3", "trtllm_mha"] }')
        text = text.replace("[baseline]", '[baseline]\nattention-backend = "fa3"', 1)
    text = text.replace('name = "simulated-demo"', f'name = "{name}"')
    if storage is not None:
        text = text.replace('n_trials = 12', f'n_trials = 12\nstorage = "{storage}"')
    # Up to 0.98 so that part of the space runs out of memory at CUDA-graph capture (a failure
    # class).
    text = text.replace("max = 0.92, step = 0.02", "max = 0.98, step = 0.02")
    listed = ", ".join(f'"{c}"' for c in constraints)
    text = text.replace('constraints = ["error_rate <= 0.01"]', f"constraints = [{listed}]")
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


def run_oracle_study(study_file: Path, n_measured: int = 14, *, seed: int = 5, noise: float = 0.02,
                     sampler: SamplerName = "tpe") -> optuna.Study:
    """Run (or continue) the study of ``study_file`` until ``n_measured`` trials used the 'server':
    the product's own loop (``evaluate_search``), stored where the study file says. Seed 5: with the
    designed start of tuner/search/baseline.py its 14 trials include an out-of-memory start,
    infeasible, skipped and duplicate trials (the query tests read each kind)."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    spec = load_study_file(study_file)
    url = spec.study.storage
    storage = _fast_sqlite(url) if url.startswith("sqlite") else make_storage(url)
    return evaluate_search(spec, simulator_landscape(spec, noise=noise), n_trials=n_measured,
                           seed=seed, sampler=sampler, storage=storage).study


def _fast_sqlite(url: str) -> optuna.storages.RDBStorage:
    """SQLite without fsync: a test study is written hundreds of times (one commit per attribute),
    and on a busy disk each synced commit costs ~10 ms. What is stored is the same."""
    from sqlalchemy import event

    storage = optuna.storages.RDBStorage(url)
    event.listen(storage.engine, "connect", lambda conn,
                 _record: conn.execute("PRAGMA synchronous=OFF"))
    storage.engine.dispose()  # reconnect so the pragma applies from the first write
    return storage


@pytest.fixture(scope="session")
def _oracle_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One oracle study per test session (about 2 s); tests get copies."""
    directory = tmp_path_factory.mktemp("oracle-study")
    path = write_study_file(directory)
    run_oracle_study(path)
    return path


@pytest.fixture
def stored_study(_oracle_template: Path, tmp_path: Path) -> Path:
    """A study file in ``tmp_path`` with its own copy of a 14-trial SQLite study (OOM, infeasible,
    skipped, duplicate trials included)."""
    for name in (_oracle_template.name, _oracle_template.with_suffix(".db").name):
        shutil.copy(_oracle_template.parent / name, tmp_path / name)
    return tmp_path / _oracle_template.name


class SampledOracle:
    """The oracle with per-request samples: each phase's throughputs come with their 95 % intervals
    (as a real benchmark's do), so scores, confirmations and the winner rule have intervals to work
    with."""

    def __init__(self, spec: Any, *, noise: float = 0.03, seed: int = 7, requests: int = 8) -> None:
        from tuner.evaluation.landscape import OracleMeasurer
        from tuner.simulator.profile import load_profile

        self.inner = OracleMeasurer(load_profile(), spec.option_table, spec.benchmark, noise=0.0)
        self.rng = np.random.default_rng(seed)
        self.noise, self.requests = noise, requests

    def deploy(self, config: Any) -> Any:
        return self.inner.deploy(config)

    def measure(self, phase_index: int) -> dict[str, Any]:
        from objectives.confidence import MeanSample

        metrics = dict(self.inner.measure(phase_index))
        samples = {}
        for key in ("per_request_tok_s_mean", "aggregate_tok_s"):
            if metrics.get(key) is None:
                continue
            sample = MeanSample.of(
                metrics[key] * (1 + self.rng.normal(0.0, self.noise, self.requests)))
            interval = sample.interval()
            metrics[key] = sample.estimate
            metrics[key + "_ci"] = interval.to_list() if interval else None
            samples[key] = sample.to_dict()
        metrics["samples"] = samples
        return metrics


def run_confirmed_study(study_file: Path, n_measured: int = 12, *, top: int = 3,
                        repeats: int = 2) -> optuna.Study:
    """A stored study with intervals and a finished confirmation stage (the top ``top`` and the
    baseline, ``repeats`` fresh runs each), through the product's loop and its confirmation
    (tuner/run/confirm.py)."""
    from tuner.run.confirm import confirm_top
    from tuner.run.trial import TrialRunner
    from tuner.study.space import SearchSpace

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    spec = load_study_file(study_file)
    measurer = SampledOracle(spec)
    result = evaluate_search(spec, measurer, n_trials=n_measured, seed=5, sampler="tpe",
                             storage=_fast_sqlite(spec.study.storage))
    runner = TrialRunner(result.spec,  # type: ignore[arg-type]
                         SearchSpace(result.spec, result.spec.option_table), measurer)
    confirm_top(result.study, result.spec, runner, measurer,  # type: ignore[arg-type]
                top=top, repeats=repeats)
    return result.study


@pytest.fixture(scope="session")
def _confirmed_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("confirmed-study")
    path = write_study_file(directory, "confirmed", constraints=("error_rate <= 0.01",))
    run_confirmed_study(path, top=1)
    return path


@pytest.fixture
def confirmed_study(_confirmed_template: Path, tmp_path: Path) -> Path:
    """A study file in ``tmp_path`` with its own copy of a 12-trial SQLite study with intervals and
    a finished confirmation stage."""
    for name in (_confirmed_template.name, _confirmed_template.with_suffix(".db").name):
        shutil.copy(_confirmed_template.parent / name, tmp_path / name)
    return tmp_path / _confirmed_template.name
