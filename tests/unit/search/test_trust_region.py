"""The grey-box sampler's trust region (tuner/search/trust_region.py): a box in rungs around the
best trial, where it proposes while the box has anything unmeasured."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.helpers import REPO
from tuner.evaluation.landscape import evaluate_search, simulator_landscape
from tuner.search.baseline import designed_start
from tuner.search.candidates import Candidates, candidates
from tuner.search.greybox import GreyBoxSampler, Observations, observe
from tuner.search.trust_region import (
    RADIUS,
    STALL,
    one_flag_at_a_time,
    radius,
    rung_table,
    within,
)
from tuner.sglang.options import load_option_table
from tuner.store.record import TrialRecord
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace

DEMO = REPO / "studies" / "simulated.toml"


def test_rungs_are_ranks_and_every_input_may_move_at_least_one_rung() -> None:
    three = np.array([0.0, 0.5, 1.0])
    many = np.linspace(0.0, 1.0, 31)
    x = np.array([[three[i % 3], many[j]] for i in range(3) for j in range(31)])
    rungs = rung_table(x)
    assert rungs[:, 0].max() == 2 and rungs[:, 1].max() == 30
    centre = int(np.flatnonzero((rungs[:, 0] == 0) & (rungs[:, 1] == 15))[0])
    inside = within(rungs, centre, 0.2)
    assert inside[centre]
    # a three-valued input: one rung (0.2 × 2 rounds up to 1), never two; 31 values: ± 6 rungs
    assert set(rungs[inside, 0]) == {0.0, 1.0}
    assert set(rungs[inside, 1]) == set(range(9, 22))


def _table_and_sampler() -> tuple[SearchSpace, GreyBoxSampler]:
    spec = load_study_file(DEMO)
    space = SearchSpace(spec, load_option_table(spec.study.sglang_version))
    return space, GreyBoxSampler(space, {1: 1.0}, seed=0)


def _observations(rows: list[int], scores: np.ndarray) -> Observations:
    best = max(rows, key=lambda r: scores[r])
    return Observations(feasible_rows=rows, feasible=[1.0] * len(rows),
                        feasible_started=[True] * len(rows), accept_rows=rows,
                        log_accept=[0.0] * len(rows), phase_rows={1: rows},
                        log_phase={1: list(np.log(scores[rows]))}, pending_rows=[], known=set(rows),
                        best_score=float(scores[best]), leaders=[best], oom_rows=[])


def test_it_proposes_near_the_best_trial_even_where_far_corners_look_better() -> None:
    space, sampler = _table_and_sampler()
    table = candidates(space)
    # The score rises towards the far corner of the inputs, where nothing is measured yet, so global
    # expected improvement goes there; the best trial sits at the low corner, a hair above the rest.
    size = table.x.sum(1)
    scores = 1.0 + size
    middle = np.flatnonzero(size < np.quantile(size, 0.7))
    rows = list(np.random.default_rng(1).choice(middle, 30, replace=False))
    low = int(np.argmin(size))
    rows = [*rows, low]
    scores[low] = 1.01 * max(scores[r] for r in rows)
    pick = sampler.choose(table, _observations(rows, scores), {1: 1.0})
    assert pick is not None and pick not in rows
    assert within(table.rungs, low, RADIUS)[pick]


def test_once_the_box_is_measured_out_it_searches_the_whole_space() -> None:
    space, sampler = _table_and_sampler()
    table = candidates(space)
    scores = 1.0 + table.x.sum(1)
    low = int(np.argmin(scores))
    scores[low] = scores.max() + 1.0
    box = set(np.flatnonzero(within(table.rungs, low, RADIUS)).tolist())
    rows = sorted(
        box | set(np.random.default_rng(2).choice(len(table.keys), 6, replace=False).tolist()))
    assert len(box) < len(table.keys)
    pick = sampler.choose(table, _observations(rows, scores), {1: 1.0})
    assert pick is not None and pick not in box


@pytest.mark.designed_start
def test_the_box_doubles_after_each_stall_and_only_the_samplers_own_trials_count() -> None:
    assert radius(0) == radius(STALL - 1) == RADIUS and radius(STALL) == 2 * RADIUS
    spec = load_study_file(DEMO)
    space = SearchSpace(spec, load_option_table(spec.study.sglang_version))
    table = candidates(space)
    start = 1 + len(designed_start(space, space.locate(space.encode(spec.baseline))))
    queued_only = evaluate_search(spec, simulator_landscape(spec), n_trials=start, seed=0,
                                  sampler="greybox")
    # however the designed shapes scored
    assert observe(queued_only.study, table, [1, 64]).stall == 0
    result = evaluate_search(spec, simulator_landscape(spec), n_trials=start + 5, seed=0,
                             sampler="greybox")
    scores = [TrialRecord.from_stored(t).score for t in result.trials]
    last_rise = max(i for i, s in enumerate(scores)
                    if s is not None and s >= max(x or 0.0 for x in scores[:i + 1]))
    assert observe(result.study, table, [1, 64]).stall \
           == len(scores) - 1 - max(last_rise, start - 1)


def test_one_flag_at_a_time_counts_flags_not_columns_and_leaves_the_tree_free() -> None:
    # columns: 0 a tree input (free), 1 the static fraction, 2-3 a categorical flag's two columns
    x = np.array([[0.0, 0.0, 1.0, 0.0],   # the centre
                  [1.0, 0.0, 1.0, 0.0],   # the tree alone
                  [1.0, 1.0, 1.0, 0.0],   # the tree and the fraction
                  [0.0, 0.0, 0.0, 1.0],   # the categorical flag alone (two columns move)
                  [0.0, 1.0, 0.0, 1.0]])  # the fraction and the categorical flag
    assert one_flag_at_a_time(x, 0, [(1,), (2, 3)]).tolist() == [True, True, True, True, False]


def _moved_flags(table: Candidates, a: int, b: int) -> int:
    return sum(bool((np.abs(table.x[a, list(cols)] - table.x[b, list(cols)]) > 1e-9).any())
               for cols in table.other_flags)


def test_after_a_failure_in_the_box_it_moves_one_memory_flag_at_a_time() -> None:
    space, sampler = _table_and_sampler()
    table = candidates(space)
    assert len(table.other_flags) == 2  # the demo's static fraction and CUDA-graph size
    other = [c for cols in table.other_flags for c in cols]
    # Every memory flag pays (the score rises along both, as far as the speed models can see: a
    # graph size above the largest batch is read as that batch's), and the best trial sits at
    # their low corner: expected improvement alone moves both at once.
    scores = 1.0 + table.speed_x[:, other].sum(1) + 0.1 * table.speed_x.sum(1)
    low = int(np.argmin(scores))
    middle = np.flatnonzero(scores < np.quantile(scores, 0.5))
    rows = [r for r in np.random.default_rng(3).choice(middle, 30, replace=False).tolist()
            if r != low]
    rows.append(low)
    scores[low] = 1.01 * max(scores[r] for r in rows)
    calm = _observations(rows, scores)
    pick = sampler.choose(table, calm, {1: 1.0})
    assert pick is not None and _moved_flags(table, pick, low) == 2
    # one configuration inside the box crashed under load: one memory flag at a time from now on
    box = within(table.rungs, low, RADIUS)
    crashed = next(r for r in np.flatnonzero(box).tolist() if r not in rows)
    stormy = replace(calm, run_failed_rows=[crashed], known=calm.known | {crashed})
    pick = sampler.choose(table, stormy, {1: 1.0})
    assert pick is not None and _moved_flags(table, pick, low) == 1
