"""The trial runner with a fake measurer: outcomes, duplicates, failed starts, skipping C=64."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
import pytest

from objectives.scoring import STARTED_KEY, VALID_KEY
from tuner.core.errors import Interrupted
from tuner.core.interrupts import interruptible
from tuner.run.trial import TrialRunner
from tuner.search.baseline import enqueue_baseline
from tuner.sglang.launch import ServerConfig
from tuner.sglang.options import load_option_table
from tuner.store.keys import Key
from tuner.store.record import TrialRecord, best_record, measured_records
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace
from tuner.targets.base import DeployFailed

STUDY = """
[study]
name = "t"
[target]
kind = "simulated"
[server.flags]
model-path = "m"
speculative-algorithm = "EAGLE3"
speculative-draft-model-path = "d"
[search]
speculative-num-steps = { min = 1, max = 6 }
speculative-eagle-topk = { choices = [1] }
[baseline]
speculative-num-steps = 3
speculative-eagle-topk = 1
[benchmark]
phases = [{ concurrency = 1, requests = 2 }, { concurrency = 64, requests = 64 }]
[objective]
weights = { c1 = 0.5, c64 = 0.5 }
constraints = ["error_rate <= 0.01"]
"""


class FakeMeasurer:
    """C=1 grows with steps, C=64 peaks at 3; steps=6 does not start (out of memory)."""

    def __init__(self) -> None:
        self.deployed: list[int] = []
        self.measured: list[tuple[int, int]] = []
        self.steps = 0

    def deploy(self, config: ServerConfig) -> Mapping[str, Any]:
        self.steps = config.get("--speculative-num-steps")
        self.deployed.append(self.steps)
        if self.steps == 6:
            raise DeployFailed("out-of-memory", "Capture cuda graph failed", log_tail="...OOM...")
        return {"launch": "x", "timings": {"deploy_s": 0.1, "ready_s": 0.2}}

    def measure(self, phase_index: int) -> Mapping[str, Any]:
        self.measured.append((self.steps, phase_index))
        if phase_index == 0:
            return {"per_request_tok_s_mean": 100.0 + 40 * self.steps, "error_rate": 0.0}
        return {"aggregate_tok_s": 2000.0 - 100 * (self.steps - 3) ** 2, "error_rate": 0.02
                if self.steps == 5 else 0.0}


def study_with(tmp_path: Path, measurer: Any) -> tuple[optuna.Study, TrialRunner, SearchSpace]:
    """STUDY's study with its baseline queued, and a runner that measures through ``measurer``."""
    path = tmp_path / "s.toml"
    path.write_text(STUDY)
    spec = load_study_file(path)
    space = SearchSpace(spec, load_option_table())
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    enqueue_baseline(study, space, spec)
    return study, TrialRunner(spec, space, measurer), space


@pytest.fixture
def setup(tmp_path: Path) -> tuple[optuna.Study, TrialRunner, FakeMeasurer, SearchSpace]:
    measurer = FakeMeasurer()
    study, runner, space = study_with(tmp_path, measurer)
    return study, runner, measurer, space


def run_steps(study: optuna.Study, runner: TrialRunner, *steps: int) -> None:
    for s in steps:
        study.enqueue_trial({"speculative-num-steps": s, "speculative-eagle-topk": 1})
        study.optimize(runner, n_trials=1)


def test_baseline_runs_first_and_scores_one(setup) -> None:
    study, runner, measurer, _ = setup
    study.optimize(runner, n_trials=1)
    first = study.trials[0]
    assert measurer.deployed == [3]
    assert first.value == pytest.approx(1.0)
    assert study.user_attrs["references"] == {"1": 220.0, "64": 2000.0}
    assert first.user_attrs["outcome"] == "measured"
    assert first.user_attrs["phases"]["64"]["aggregate_tok_s"] == 2000.0
    assert first.constraints == {VALID_KEY: 0.0, STARTED_KEY: 0.0, "error_rate <= 0.01": 0.0}


def test_duplicate_is_reused_not_redeployed(setup) -> None:
    study, runner, measurer, _ = setup
    study.optimize(runner, n_trials=1)
    run_steps(study, runner, 3)
    assert measurer.deployed == [3]
    dup = study.trials[1]
    assert dup.user_attrs["outcome"] == "duplicate" and dup.user_attrs["duplicate_of"] == 0
    assert dup.value == study.trials[0].value
    assert len(measured_records(study)) == 1


def test_failed_start_is_complete_and_infeasible_with_its_class(setup) -> None:
    study, runner, _, _ = setup
    study.optimize(runner, n_trials=1)
    run_steps(study, runner, 6)
    failed = study.trials[1]
    assert failed.state == optuna.trial.TrialState.COMPLETE
    assert failed.constraints[STARTED_KEY] == 1.0
    assert failed.user_attrs["failure_class"] == "out-of-memory"
    assert "OOM" in failed.user_attrs["log_tail"]
    assert failed.user_attrs["counts"] is True


def test_constraint_violation_makes_trial_infeasible_and_not_best(setup) -> None:
    study, runner, _, _ = setup
    study.optimize(runner, n_trials=1)
    run_steps(study, runner, 5, 4)
    five = study.trials[1]
    assert five.constraints["error_rate <= 0.01"] == pytest.approx(0.01)
    assert best_record(study).number == 2  # steps=4: 260/220·½ + 1900/2000·½ = 1.066


def test_hopeless_trial_skips_c64(setup) -> None:
    study, runner, measurer, _ = setup
    study.optimize(runner, n_trials=1)
    run_steps(study, runner, 4, 2, 1)
    # steps=1: C=1 = 140 → even C=64 at 1.15 × best seen (2000) cannot beat steps=4's 1.066
    last = study.trials[-1]
    assert last.user_attrs["skipped_phases"] == [64]
    assert (1, 1) not in measurer.measured
    skip = last.user_attrs["skip"]
    assert skip["optimistic_score"] < skip["incumbent_score"]
    assert skip["bounds"]["64"] == pytest.approx(2000.0 * 1.15)
    assert best_record(study).number == 1


def test_a_reference_trial_is_never_cut_short(setup) -> None:
    """The hopeless trial above, queued as a reference point (as the designed start queues SGLang's
    adaptive steps and speculation off): every phase measured, for the comparison ``best``
    prints."""
    study, runner, measurer, _ = setup
    study.optimize(runner, n_trials=1)
    run_steps(study, runner, 4, 2)
    study.enqueue_trial({"speculative-num-steps": 1, "speculative-eagle-topk": 1},
                        user_attrs={Key.REFERENCE: "off"})
    study.optimize(runner, n_trials=1)
    last = study.trials[-1]
    assert (1, 1) in measurer.measured
    assert "skipped_phases" not in last.user_attrs or not last.user_attrs["skipped_phases"]
    assert last.user_attrs["phases"]["64"]["aggregate_tok_s"] == 2000.0 - 100 * 4


class ResolvingMeasurer(FakeMeasurer):
    """With the target's own SGLang to ask: it runs steps 4 as steps 3 (the same server as the
    baseline) and refuses steps 2."""

    def resolve(self, config: ServerConfig) -> Mapping[str, Any] | None:
        steps = config.get("--speculative-num-steps")
        if steps == 2:
            raise DeployFailed("invalid-flags",
                               "SGLang 0.5.23 on gpu-1 refuses this configuration (exit 1): "
                               "ValueError: no")
        return {"speculative_algorithm": "EAGLE3", "speculative_num_steps": min(steps, 3),
                "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "page_size": 1}


def test_the_targets_sglang_decides_identity_and_refusals(tmp_path: Path) -> None:
    measurer = ResolvingMeasurer()
    study, runner, _ = study_with(tmp_path, measurer)
    study.optimize(runner, n_trials=1)
    run_steps(study, runner, 4, 2)
    assert measurer.deployed == [3]  # steps 4 is the baseline's server; steps 2 never deployed
    same, refused = study.trials[1], study.trials[2]
    assert same.user_attrs["outcome"] == "duplicate" and same.user_attrs["duplicate_of"] == 0
    assert same.user_attrs["config_key"] == study.trials[0].user_attrs["config_key"]
    assert same.user_attrs["effective"]["speculative_num_steps"] == 3
    assert refused.user_attrs["outcome"] == "rejected" and refused.constraints[VALID_KEY] == 1.0
    assert refused.user_attrs["reason"].startswith("SGLang 0.5.23 on gpu-1 refuses")
    assert len(measured_records(study)) == 1


class SlowToResolve(FakeMeasurer):
    """The target's own SGLang is being asked (seconds on a real host) when the signal lands."""

    def resolve(self, config: ServerConfig) -> Mapping[str, Any] | None:
        raise Interrupted(signal.SIGTERM)


def test_a_trial_interrupted_while_sglang_is_asked_keeps_what_it_requested(tmp_path: Path) -> None:
    study, runner, _ = study_with(tmp_path, SlowToResolve())
    with pytest.raises(Interrupted):
        study.optimize(runner, n_trials=1)
    record = TrialRecord.from_stored(study.trials[0])
    # the baseline's flags: what `spectune trial N` shows for it
    assert record.params_decoded["--speculative-num-steps"] == 3
    assert record.config is not None and record.config.get("--speculative-num-steps") == 3


def test_a_signal_while_the_sampler_suggests_waits_for_the_first_save(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    study, runner, _ = study_with(tmp_path, FakeMeasurer())
    suggest = SearchSpace.suggest

    def suggest_then_signal(self: SearchSpace, trial: optuna.Trial) -> Any:
        proposal = suggest(self, trial)  # Optuna has stored the values
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next bytecode
        return proposal

    monkeypatch.setattr(SearchSpace, "suggest", suggest_then_signal)
    with interruptible(), pytest.raises(Interrupted):
        study.optimize(runner, n_trials=1)
    record = TrialRecord.from_stored(study.trials[0])
    # raised once what it requested was stored: not "flags requested: none"
    assert record.params_decoded["--speculative-num-steps"] == 3
    assert record.config is not None and record.config.get("--speculative-num-steps") == 3

