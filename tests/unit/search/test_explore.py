"""After a proposal that repeats a measured configuration, the loop measures an unmeasured neighbour
of it."""

from __future__ import annotations

import time

import optuna
import pytest

from tests.helpers import STUDIES
from tuner.evaluation.landscape import OracleMeasurer
from tuner.run.loop import Limits, run_trials
from tuner.run.trial import TrialRunner
from tuner.search.baseline import enqueue_baseline
from tuner.search.explore import neighbours
from tuner.sglang.options import load_option_table
from tuner.simulator.profile import load_profile
from tuner.store.keys import Key
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace


def test_neighbours_are_one_step_along_one_dimension() -> None:
    spec = load_study_file(STUDIES / "simulated.toml")
    space = SearchSpace(spec, load_option_table())
    baseline = space.encode(spec.baseline)
    found = neighbours(space, baseline)
    assert found, "the baseline has neighbours"
    for point in found:
        changed = [name for name in baseline if point[name] != baseline[name]]
        assert len(changed) == 1
        d = next(d for d in space.dimensions if d.name == changed[0])
        if d.encoding != "categorical":
            assert abs(point[d.name] - baseline[d.name]) == d.step
        assert d.low <= point[d.name] <= d.high if d.encoding != "categorical" else True
    assert len({tuple(sorted(p.items())) for p in found}) == len(found)


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_a_sampler_stuck_on_one_point_still_reaches_n_trials() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    spec = load_study_file(STUDIES / "simulated.toml")
    table = load_option_table()
    space = SearchSpace(spec, table)
    baseline = space.encode(spec.baseline)
    # A sampler that proposes the baseline forever: without exploration every trial after the first
    # is a free duplicate and the study would end "exhausted" with one measurement.
    stuck = optuna.samplers.PartialFixedSampler(baseline, optuna.samplers.RandomSampler(seed=0))
    study = optuna.create_study(direction="maximize", sampler=stuck)
    enqueue_baseline(study, space, spec)
    runner = TrialRunner(spec, space,
                         OracleMeasurer(load_profile(spec.target.settings.profile), table,
                                        spec.benchmark))
    stopped = run_trials(study, runner,
                         Limits(n_trials=5, timeout_s=None, started=time.monotonic()),
                         "sqlite:///:memory:")
    assert stopped == "n_trials"
    measured = [t for t in study.trials if t.user_attrs.get(Key.COUNTS)]
    assert len(measured) == 5
    assert len({t.user_attrs["config_key"] for t in measured}) == 5
    explored = [t for t in measured if Key.NEIGHBOUR_OF in t.user_attrs]
    assert len(explored) == 4
    for t in explored:  # each one step away from the point the sampler kept proposing
        assert sum(t.params[name] != baseline[name] for name in baseline) == 1
