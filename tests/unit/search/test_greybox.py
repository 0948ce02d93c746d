"""The grey-box sampler (tuner/search/greybox.py): its candidate table, what it learns from each
kind of trial, and that it finds a hand-checkable optimum without re-measuring anything."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import optuna
import pytest

from tests.helpers import REPO
from tests.unit.evaluation.steps_landscape import landscape as steps_landscape
from tuner.evaluation.landscape import evaluate_search, simulator_landscape
from tuner.search.candidates import candidates
from tuner.search.greybox import GreyBoxSampler, Observations, monotone_oom, observe
from tuner.search.samplers import make_sampler
from tuner.sglang.options import load_option_table
from tuner.store.record import TrialRecord
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace

DEMO = REPO / "studies" / "simulated.toml"


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def _space() -> SearchSpace:
    spec = load_study_file(DEMO)
    return SearchSpace(spec, load_option_table(spec.study.sglang_version))


def test_the_candidates_are_the_distinct_valid_configurations_with_inputs_in_the_unit_cube() -> None:  # noqa: E501 - the test's name says what it checks
    space = _space()
    table = candidates(space)
    assert len(table.keys) == len(set(table.keys)) == space.enumerate().distinct_valid
    assert table.x.shape == (len(table.keys), len(space.dimensions))
    assert table.x.min() >= 0.0 and table.x.max() <= 1.0
    tree = [i for i, d in enumerate(space.dimensions)
            if d.name.split(".")[0].startswith("speculative-")]
    assert list(table.tree_columns) == tree
    for row in (0, len(table.keys) // 2, len(table.keys) - 1):
        assert space.decode(table.params[row]).key == table.keys[row]


def test_it_finds_the_optimum_of_a_hand_checkable_landscape_and_never_measures_a_configuration_twice() -> None:  # noqa: E501 - the test's name says what it checks
    spec = load_study_file(DEMO)
    result = evaluate_search(spec, steps_landscape(spec), n_trials=14, seed=0, sampler="greybox")
    records = [TrialRecord.from_stored(t) for t in result.trials]
    measured = [r for r in records if r.is_measured]
    assert len({r.config_key for r in measured}) == len(measured)
    assert result.best_config is not None and result.best_config.get("--speculative-num-steps") == 6
    # top-k 4 never starts: once that is known, the feasibility model keeps the search away from it
    # — below the third of the trials a search told nothing would spend there (a third of this space
    # is top-k 4), though it still tries it where less memory might start, once every trial ties
    topk4 = [r for r in measured if r.config and r.config.get("--speculative-eagle-topk") == 4]
    assert 1 <= len(topk4) <= 4
    best = next(r.number for r in measured if r.score == max(m.score or 0.0 for m in measured))
    assert sum(r.number < best for r in topk4) <= 2  # before the optimum: one, maybe two


def test_a_skipped_phase_teaches_the_other_models_and_a_failed_start_only_feasibility() -> None:
    spec = load_study_file(DEMO)
    space = SearchSpace(spec, load_option_table(spec.study.sglang_version))
    # (observe reads any study: random search makes losing trials, so the C=64 skip fires)
    result = evaluate_search(spec, simulator_landscape(spec), n_trials=12, seed=1, sampler="random")
    table = candidates(space)
    obs = observe(result.study, table, [1, 64])
    records = [TrialRecord.from_stored(t) for t in result.trials
               if TrialRecord.from_stored(t).is_measured]
    skipped = [table.index[r.config_key] for r in records if r.skipped_phases and r.config_key]
    benchmarked = [table.index[r.config_key] for r in records if r.is_benchmarked and r.config_key]
    assert skipped, "the C=64 skip should have fired in 12 trials"
    assert set(obs.accept_rows) == set(obs.phase_rows[1]) == set(benchmarked)
    assert set(obs.phase_rows[64]) == set(benchmarked) - set(skipped)
    assert len(obs.feasible_rows) == len(records) and obs.known >= set(obs.feasible_rows)


def test_the_composed_score_is_what_it_ranks_by() -> None:
    # Two factors that are each monotone (accept length grows with the tree, speed per accepted
    # token falls): the pick must be the row whose product is largest, not the largest of either
    # factor.
    space = _space()
    table = candidates(space)
    sampler = GreyBoxSampler(space, {1: 1.0}, seed=0)
    tree_size = table.x[:, list(table.tree_columns)].sum(1)
    accept, per_token = 1.0 + 3.0 * tree_size, 1.0 / (1.0 + 0.6 * tree_size ** 2)
    rows = list(np.random.default_rng(0).choice(len(table.keys), 60, replace=False))
    obs = Observations(feasible_rows=rows, feasible=[1.0] * len(rows),
                       feasible_started=[True] * len(rows), accept_rows=rows,
                       log_accept=list(np.log(accept[rows])), phase_rows={1: rows},
                       log_phase={1: list(np.log(per_token[rows]))}, pending_rows=[],
                       known=set(rows),
                       best_score=float(max(accept[rows] * per_token[rows])), leaders=[],
                       oom_rows=[])
    pick = sampler.choose(table, obs, {1: 1.0})
    assert pick is not None and pick not in rows
    product = accept * per_token
    # (expected improvement may explore a little; the largest of either factor alone is at most 0.63
    # × max)
    assert product[pick] >= 0.85 * product.max()


def test_a_multi_objective_study_gets_tpe() -> None:
    sampler = make_sampler("greybox", 0, multi_objective=True, space=_space())
    assert isinstance(sampler, optuna.samplers.TPESampler)


def test_the_out_of_memory_model_is_monotone_in_the_memory_flags() -> None:
    # Runs out where the sum of the memory inputs is large: trained on a few starts and failures, it
    # must rank every larger configuration at least as likely to fail, and separate the two groups.
    table = candidates(_space())
    memory = list(table.memory_columns)
    size = table.x[:, memory].sum(1)
    order = np.argsort(size)
    started, failed = list(order[:40:4]), list(order[-40::4])
    p = monotone_oom(table, started, failed, np.arange(len(table.keys)))
    assert p[failed].min() > 0.5 > p[started].max()
    x = table.x[:, memory]
    for a in np.random.default_rng(0).choice(len(table.keys), 20, replace=False):
        larger = np.all(x >= x[a], axis=1)
        assert larger.sum() >= 1 and p[larger].min() >= p[a] - 1e-12


def test_the_out_of_memory_model_reads_the_typed_cause_not_a_substring() -> None:
    # SGLang's too-small-pool message has no "kv" in it; a larger static fraction cures it, so it
    # must not teach the monotone out-of-memory model. A graph-capture or decode OOM must.
    from optuna.distributions import FloatDistribution
    from optuna.trial import create_trial

    from tuner.store.keys import Key

    space = _space()
    table = candidates(space)
    study = optuna.create_study(direction="maximize")
    messages = {
        "kv": ("out-of-memory",
               "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
               None),
        "graph": ("out-of-memory", "Exception: Capture cuda graph failed: CUDA out of memory. "
                                   "Tried to allocate 2 GiB",
                  None),
        "decode": ("crashed-under-load", "the server exited with code 1 at C=64", "decode-oom"),
    }
    rows = {}
    for (name, (failure_class, text, cause)), key in zip(messages.items(), table.keys,
                                                         strict=False):
        attrs = {Key.CONFIG_KEY: key, Key.OUTCOME: "run-failed" if cause else "deploy-failed",
                 Key.COUNTS: True, Key.FAILURE_CLASS: failure_class, Key.FAILURE: text,
                 **({Key.FAILURE_CAUSE: cause} if cause else {})}
        study.add_trial(create_trial(value=1.0, params={"x": 0.5},
                                     distributions={"x": FloatDistribution(0, 1)},
                                     user_attrs=attrs, constraints={"server started": 1.0}))
        rows[name] = table.index[key]
    obs = observe(study, table, [1, 64])
    assert rows["graph"] in obs.oom_rows and rows["decode"] in obs.oom_rows
    assert rows["kv"] not in obs.oom_rows and rows["kv"] in obs.feasible_rows


def test_a_tree_shape_that_failed_while_running_keeps_little_of_its_feasibility() -> None:
    from tuner.search.greybox import LARGER_TREE_THAN_RUN_FAILURE, SAME_SHAPE_AS_RUN_FAILURE

    space = _space()
    table = candidates(space)
    assert table.tree_values is not None
    sampler = GreyBoxSampler(space, {1: 1.0}, seed=0)
    rows = list(np.random.default_rng(1).choice(len(table.keys), 30, replace=False))
    trees = table.tree_values[:, :2]
    # a failed tree with both a larger and a smaller one in the space
    failed = next(r for r in rows if ((trees > trees[r]).all(1).any()
                                      and (trees < trees[r]).any(1).any()))
    ok = [r for r in rows if r != failed]
    base = dict(accept_rows=ok, log_accept=[0.0] * len(ok), phase_rows={1: ok},
                log_phase={1: [0.0] * len(ok)},
                pending_rows=[], known=set(rows), best_score=1.0, leaders=[], oom_rows=[])
    labels = dict(feasible_rows=[failed, *ok], feasible=[0.0] + [1.0] * len(ok),
                  feasible_started=[False] + [True] * len(ok))
    told = Observations(**labels, run_failed_rows=[failed], **base)  # type: ignore[arg-type]
    twice = Observations(**labels, run_failed_rows=[failed, failed],
                         **base)  # type: ignore[arg-type]
    untold = Observations(**labels, **base)  # type: ignore[arg-type]
    everything = np.arange(len(table.keys))
    shape = list(table.shape_columns)
    same = (np.abs(table.x[:, shape] - table.x[failed, shape]) <= 1e-9).all(1)
    larger = (trees >= trees[failed]).all(1) & ~same
    _, p_told = sampler.predict(table, told, everything)
    _, p_twice = sampler.predict(table, twice, everything)
    _, p_untold = sampler.predict(table, untold, everything)
    assert same.any() and larger.any() and (~same & ~larger).any()
    assert np.allclose(p_told[same], SAME_SHAPE_AS_RUN_FAILURE * p_untold[same])
    # a deeper, wider tree runs the same kernels harder: it keeps less too
    assert np.allclose(p_told[larger], LARGER_TREE_THAN_RUN_FAILURE * p_untold[larger])
    assert np.allclose(p_told[~same & ~larger], p_untold[~same & ~larger])
    # each failure is evidence of its own
    assert np.allclose(p_twice[larger], LARGER_TREE_THAN_RUN_FAILURE ** 2 * p_untold[larger])


@pytest.mark.parametrize("concurrencies", [(1, 64), (1, 48), (1,)])
def test_the_speed_models_read_every_graph_size_that_holds_the_largest_batch_as_one(
        concurrencies: tuple[int, ...]) -> None:
    spec = load_study_file(DEMO)  # graph sizes 32, 64, 128
    phases = tuple(replace(spec.benchmark.phases[0], concurrency=c) for c in concurrencies)
    spec = replace(spec, benchmark=replace(spec.benchmark, phases=phases))
    space = SearchSpace(spec, spec.option_table)
    table = candidates(space)
    graph = next(i for i, d in enumerate(space.dimensions)
                 if d.flag == "--cuda-graph-max-bs-decode")
    dimension = space.dimensions[graph]  # a ladder: the parameter is the choice's index
    sizes = np.array([dimension.choices[p[dimension.name]] for p in table.params])
    holding = min(int(s) for s in sizes if s >= max(concurrencies))
    # memory and feasibility still tell every size apart
    assert len(set(table.x[:, graph])) == len(set(sizes))
    speed = {int(s): float(v) for s, v in zip(sizes, table.speed_x[:, graph], strict=True)}
    assert {speed[int(s)] for s in sizes if s >= holding} == {speed[holding]}
    below = sorted({int(s) for s in sizes if s < holding})
    assert len({speed[s] for s in below} | {speed[holding]}) == len(below) + 1
    others = [j for j in range(table.x.shape[1]) if j != graph]
    assert np.array_equal(table.speed_x[:, others], table.x[:, others])


@pytest.mark.designed_start
def test_the_real_loop_stops_probing_a_fast_corner_that_answers_wrongly_from_above() -> None:
    """unsafe_fast: every tree with top-k ≥ 2 and steps ≥ 4 answers wrongly, and those are the
    fastest. Told only the failures, the search must not walk down the corner one new shape at a
    time (8/4, 5/4, 5/2, 4/2, 4/4, 6/4: 8 run failures in 25 trials with the same-shape rule
    alone)."""
    from bench.failure_avoidance import STUDY
    from bench.landscapes import unsafe_fast
    from bench.landscapes._base import Point
    from tuner.store.record import Outcome, measured_records

    spec = load_study_file(STUDY)
    landscape = unsafe_fast.landscape(spec)
    result = evaluate_search(spec, landscape, n_trials=25, seed=0)
    measured = measured_records(result.study)
    failed = [r for r in measured if r.outcome is Outcome.RUN_FAILED]
    assert len(measured) == 25 and len(failed) <= 6
    assert result.best is not None and result.best.outcome is Outcome.MEASURED
    assert result.best.config is not None
    assert unsafe_fast.unsafe(Point.of(result.best.config), 64) is None
