"""The public extension point: a custom landscape through ``evaluate_search`` and through the
bench's ``--landscape MODULE:FACTORY``, on a landscape whose optimum is known
(tests/unit/evaluation/steps_landscape.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import optuna
import pytest

from tests.helpers import REPO, STUDIES
from tests.unit.evaluation.steps_landscape import StepsMeasurer, landscape
from tuner.evaluation.landscape import MeasuredLandscape, evaluate_search, simulator_landscape
from tuner.evaluation.reference_search import found_so_far, truth_table
from tuner.store.record import Outcome, TrialRecord
from tuner.study.load import load_study_file

STEPS = "--speculative-num-steps"


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def test_the_real_loop_finds_the_known_optimum_of_a_custom_landscape() -> None:
    spec = load_study_file(STUDIES / "simulated.toml")
    steps = landscape(spec)
    result = evaluate_search(spec, steps, n_trials=20, seed=0, sampler="tpe")
    assert result.stopped_by == "n_trials" and result.measured == 20
    # the most steps: the optimum
    assert result.best_config is not None and result.best_config.get(STEPS) == 6
    assert steps.true_score(result.best_config) == max(steps.true_scores().values())
    trials = result.trials
    assert trials[0].user_attrs.get("baseline") and trials[0].user_attrs["outcome"] == "measured"
    failed = [t for t in trials if t.user_attrs.get("outcome") == "deploy-failed"]
    assert failed and all(t.user_attrs["failure_class"] == "out-of-memory" for t in failed)
    # only the baseline then
    assert result.best_after(1) is not None and result.best_after(1).number == 0


def test_a_bare_measurer_is_used_as_it_is_and_the_pick_can_start() -> None:
    result = evaluate_search(STUDIES / "simulated.toml", StepsMeasurer(), n_trials=8, seed=1,
                             sampler="random")
    assert result.measured == 8 and result.spec.study.sampler == "random" \
           and result.spec.study.seed == 1
    assert result.best_config is not None \
           and result.best_config.get("--speculative-eagle-topk") != 4


def test_the_built_in_landscape_is_the_simulator_ground_truth() -> None:
    spec = load_study_file(STUDIES / "simulated.toml")
    truth = simulator_landscape(spec, noise=0.0)
    result = evaluate_search(spec, truth, n_trials=6, seed=2, sampler="tpe")
    assert result.best is not None and result.best_config is not None
    # Noiseless: the score the study measured is the truth (both are normalised by the baseline).
    assert result.best.score == pytest.approx(truth.true_score(result.best_config))


@pytest.mark.parametrize("plugin", ["tests/unit/evaluation/steps_landscape.py:landscape",
                                    "tests.unit.evaluation.steps_landscape:landscape"])
def test_the_bench_plugs_an_external_landscape(plugin: str) -> None:
    run = subprocess.run([sys.executable, "bench/sample_efficiency.py", "--landscape", plugin,
                          "--studies",
                          "studies/simulated.toml", "--seeds", "1", "--budget", "20", "--samplers",
                          "tpe"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    row = next(line for line in run.stdout.splitlines() if line.startswith("| simulated | tpe |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3].startswith("1.000 [")  # @20: the study's own pick is the optimum
    # top-k 4 never starts: not in the truth
    assert "1428 feasible distinct configurations" in run.stderr


def test_the_bench_refuses_a_factory_it_cannot_find() -> None:
    run = subprocess.run([sys.executable, "bench/sample_efficiency.py", "--landscape",
                          "tests/unit/evaluation/steps_landscape.py:nope"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "has no callable 'nope'" in run.stderr


def test_a_landscape_whose_baseline_does_not_start_is_still_searched() -> None:
    # On a real target the study stops (the operator's configuration does not start there); on a
    # landscape the baseline is a point of a model, and the search is evaluated all the same.
    spec = load_study_file(STUDIES / "simulated.toml")
    # top-k 4 never starts on this landscape
    baseline = {**spec.baseline, "--speculative-eagle-topk": 4}
    steps = MeasuredLandscape(spec, lambda seed: StepsMeasurer(), baseline=baseline)
    result = evaluate_search(None, steps, n_trials=6, seed=0, sampler="random")
    assert result.trials[0].user_attrs.get("baseline")
    assert result.trials[0].user_attrs["outcome"] == "deploy-failed"
    assert result.stopped_by == "n_trials" and result.measured == 6
    assert result.best_config is not None \
           and result.best_config.get("--speculative-eagle-topk") != 4


class WithoutErrorRate(StepsMeasurer):
    def measure(self, phase_index: int) -> dict[str, Any]:
        figures = super().measure(phase_index)
        del figures["error_rate"]
        return figures


def test_a_constraint_on_a_metric_the_measurer_never_reports_is_warned_of() -> None:
    """A metric no phase reports counts as met, so ``error_rate <= 0.01`` on a measurer that never
    reports it would hold everywhere, unseen."""
    spec = load_study_file(STUDIES / "simulated.toml")
    assert [c.metric for c in spec.objective.constraints] == ["error_rate"]
    with pytest.warns(UserWarning, match=r"constraint 'error_rate <= 0.01': the measurer "
                                         r"reported error_rate in any phase for no configuration"):
        MeasuredLandscape(spec, lambda seed: WithoutErrorRate()).true_scores()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same landscape reporting it: no warning
        assert MeasuredLandscape(spec, lambda seed: StepsMeasurer()).true_scores()


def test_a_pareto_study_searches_both_phases_figures(tmp_path: Path) -> None:
    """docs/scoring.md, "Pareto mode": two objectives, each weighted phase's own figure; an
    infeasible trial is the dominated (0, 0); the front, not one pick."""
    text = (STUDIES / "simulated.toml").read_text()
    assert "\nweights = { c1 = 0.5, c64 = 0.5 }" in text
    study = tmp_path / "pareto.toml"
    study.write_text(text.replace("\nweights = {", '\nmode = "pareto"\nweights = {', 1))
    spec = load_study_file(study)
    result = evaluate_search(spec, landscape(spec), n_trials=10, seed=0)
    assert len(result.study.directions) == 2 and result.best is None
    for trial in result.trials:
        record = TrialRecord.from_stored(trial)
        assert record.config is not None
        if record.outcome is Outcome.MEASURED:
            steps = record.config.get(STEPS)
            assert trial.values == [100.0 + 10 * steps, 1000.0 + 100 * steps]  # StepsMeasurer's
        else:  # top-k 4 never starts
            assert trial.values == [0.0, 0.0]
    front = [TrialRecord.from_stored(t).config for t in result.study.best_trials]
    assert front and all(c is not None and c.get(STEPS) == 6 for c in front)


class ProtocolOnly:
    """A ``Landscape`` by the protocol alone (``measurer`` and ``true_score``), not a
    ``MeasuredLandscape``."""

    def measurer(self, seed: int) -> StepsMeasurer:
        return StepsMeasurer()

    def true_score(self, config: Any) -> float | None:
        if config.get("--speculative-eagle-topk") == 4:
            return None  # never starts: cannot be the answer
        return 100.0 + 10 * config.get(STEPS)


def test_found_so_far_reads_a_protocol_landscape_through_its_true_score() -> None:
    spec = load_study_file(STUDIES / "simulated.toml")
    land = ProtocolOnly()
    result = evaluate_search(spec, land, n_trials=8, seed=0)
    table = truth_table(land, spec)
    assert table and max(table.values()) == 160.0  # six steps
    assert all(dict(json.loads(key)["flags"])["--speculative-eagle-topk"] != 4 for key in table)
    curve = found_so_far(result, land, 8)
    assert curve == found_so_far(result, table, 8) and len(curve) == 8 and 0 < curve[-1] <= 1.0
    assert curve[0] == pytest.approx(110.0 / 160.0)  # the baseline, one step
