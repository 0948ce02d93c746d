"""Realistic stored studies in about a second: the real ``TrialRunner`` with the simulator's ground truth.

The same path a study takes (baseline first, duplicates reused, failed starts and constraint violations stored
as constraints), but ``OracleMeasurer`` answers instead of a server — see bench/sample_efficiency.py.
Use the ``stored_study`` fixture by importing it into a conftest.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import optuna
import pytest

from tests.helpers import STUDIES
from tuner.app.tune import enqueue_baseline
from tuner.engine.fingerprint import record_or_check
from tuner.engine.landscape import OracleMeasurer
from tuner.engine.samplers import make_sampler
from tuner.engine.storage import open_study
from tuner.engine.trial import COUNTS, TrialRunner
from tuner.sglang.options import load_option_table
from tuner.simulator.profile import load_profile
from tuner.study.file import load_study_file
from tuner.study.space import SearchSpace

#: A C=64 latency bound some of the simulator's configurations break, so studies have infeasible trials.
TTFT_BOUND = "c64.ttft_p99_ms < 90"


def write_study_file(directory: Path, name: str = "demo", *, storage: str | None = None,
                     constraints: tuple[str, ...] = ("error_rate <= 0.01", TTFT_BOUND)) -> Path:
    text = (STUDIES / "simulated.toml").read_text()
    text = text.replace('name = "simulated-demo"', f'name = "{name}"')
    if storage is not None:
        text = text.replace('n_trials = 12', f'n_trials = 12\nstorage = "{storage}"')
    # Up to 0.98 so that part of the space runs out of memory at CUDA-graph capture (a failure class).
    text = text.replace("max = 0.92, step = 0.02", "max = 0.98, step = 0.02")
    listed = ", ".join(f'"{c}"' for c in constraints)
    text = text.replace('constraints = ["error_rate <= 0.01"]', f"constraints = [{listed}]")
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


def run_oracle_study(study_file: Path, n_measured: int = 14, *, seed: int = 3, noise: float = 0.02,
                     sampler: str = "tpe") -> optuna.Study:
    """Run (or continue) the study of ``study_file`` until ``n_measured`` trials used the 'server'."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    spec = load_study_file(study_file)
    table = load_option_table(spec.study.sglang_version)
    space = SearchSpace(spec, table)
    if spec.study.storage.startswith("sqlite"):
        study = optuna.create_study(study_name=spec.study.name, storage=_fast_sqlite(spec.study.storage),
                                    sampler=make_sampler(sampler, seed), direction="maximize", load_if_exists=True)
        with warnings.catch_warnings():  # experimental in name only; `tune` sets the same names
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(["score"])
    else:
        study = open_study(spec.study.storage, spec.study.name, make_sampler(sampler, seed), ["maximize"], ["score"])
    record_or_check(study, spec)
    enqueue_baseline(study, space, spec)
    measurer = OracleMeasurer(load_profile(spec.target.settings.profile), table, spec.benchmark,
                              noise=noise, seed=seed)
    runner = TrialRunner(spec, space, measurer)
    free = 0
    while sum(1 for t in study.trials if t.user_attrs.get(COUNTS)) < n_measured and free < 100:
        study.optimize(runner, n_trials=1)
        free = 0 if study.trials[-1].user_attrs.get(COUNTS) else free + 1
    return study


def _fast_sqlite(url: str) -> optuna.storages.RDBStorage:
    """SQLite without fsync: a test study is written hundreds of times (one commit per attribute), and on a
    busy disk each synced commit costs ~10 ms. What is stored is the same."""
    from sqlalchemy import event

    storage = optuna.storages.RDBStorage(url)
    event.listen(storage.engine, "connect", lambda conn, _record: conn.execute("PRAGMA synchronous=OFF"))
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
    """A study file in ``tmp_path`` with its own copy of a 14-trial SQLite study (OOM, infeasible, skipped,
    duplicate trials included)."""
    for name in (_oracle_template.name, _oracle_template.with_suffix(".db").name):
        shutil.copy(_oracle_template.parent / name, tmp_path / name)
    return tmp_path / _oracle_template.name
