"""The draft tree's shape (tuner/search/tree_shape.py): tokens per level as an accept-length input,
and the shallow trees the grey-box sampler never proposes while anything else is unmeasured."""

from __future__ import annotations

import numpy as np

from tests.helpers import REPO
from tuner.search.candidates import candidates
from tuner.search.greybox import GreyBoxSampler, Observations
from tuner.search.tree_shape import tree_shape
from tuner.sglang.launch import ServerConfig
from tuner.sglang.options import load_option_table
from tuner.study.load import load_study_file
from tuner.study.space import DRAFT, STEPS, TOPK, SearchSpace

DEMO = REPO / "studies" / "simulated.toml"


def _tree(steps: int, topk: int, draft: int) -> ServerConfig:
    return ServerConfig.build({STEPS: steps, TOPK: topk, DRAFT: draft})


def test_tokens_per_level_orders_trees_by_draft_tokens_over_steps_and_marks_the_shallow_ones() -> None:  # noqa: E501 - the test's name says what it checks
    configs = [_tree(4, 4, 9), _tree(8, 4, 9), _tree(4, 4, 17), _tree(6, 4, 4), _tree(3, 1, 4)]
    per_level, shallow = tree_shape(configs)
    # (draft − 1) ÷ steps: 2, 1, 4, 0.5, 1 — the same ratio gives the same input, whatever the steps
    assert per_level is not None and np.allclose(np.exp(per_level), [2.0, 1.0, 4.0, 0.5, 1.0])
    # only 6 steps with 4 draft tokens (3 nodes, at most 3 deep) wastes steps; a chain of steps + 1
    # never does
    assert shallow.tolist() == [False, False, False, True, False]


def test_tokens_per_level_past_top_k_read_as_top_k() -> None:
    # 4 steps of a top-2 beam: 9 draft tokens fill its levels (2 each), 17 and 33 add nothing
    # the beam can keep; a top-4 beam still fills 4 a level at 17
    configs = [_tree(4, 2, 9), _tree(4, 2, 17), _tree(4, 2, 33), _tree(4, 4, 17), _tree(4, 2, 5)]
    per_level, _ = tree_shape(configs)
    assert per_level is not None and np.allclose(np.exp(per_level), [2.0, 2.0, 2.0, 4.0, 1.0])
    # without a top-k (another kind of speculation) nothing caps it
    free, _ = tree_shape([ServerConfig.build({STEPS: 4, DRAFT: 17}), _tree(4, 2, 5)])
    assert free is not None and np.allclose(np.exp(free), [4.0, 1.0])


def test_without_steps_or_draft_tokens_there_is_no_input_and_nothing_is_shallow() -> None:
    per_level, shallow = tree_shape([ServerConfig.build({"--mem-fraction-static": 0.8}),
                                     _tree(4, 4, 9)])
    assert per_level is None and not shallow.any()
    same, _ = tree_shape([_tree(4, 4, 9), _tree(8, 2, 17)])
    assert same is None  # one ratio everywhere: no information


def _space() -> SearchSpace:
    spec = load_study_file(DEMO)
    return SearchSpace(spec, load_option_table(spec.study.sglang_version))


def test_the_accept_model_sees_the_tree_columns_and_tokens_per_level() -> None:
    table = candidates(_space())
    assert table.accept_x.shape == (len(table.keys), len(table.tree_columns) + 1)
    # the models' input range
    assert table.accept_x[:, -1].min() == 0.0 and table.accept_x[:, -1].max() == 1.0
    assert 0.05 < table.shallow.mean() < 0.5  # the demo space has shallow trees to avoid


def test_the_sampler_proposes_a_shallow_tree_only_when_nothing_else_is_left() -> None:
    space = _space()
    table = candidates(space)
    sampler = GreyBoxSampler(space, {1: 1.0}, seed=0)
    # Scores that favour few draft tokens and many steps (where the shallow trees are), so expected
    # improvement alone would pick one of them.
    scores = 1.0 + table.x[:, list(table.tree_columns)].sum(1) - 2.0 * table.accept_x[:, -1]
    rng = np.random.default_rng(0)
    deep = np.flatnonzero(~table.shallow)
    rows = sorted(rng.choice(deep, 12, replace=False).tolist())

    def observations(known: set[int]) -> Observations:
        best = max(rows, key=lambda r: scores[r])
        return Observations(feasible_rows=rows, feasible=[1.0] * len(rows),
                            feasible_started=[True] * len(rows), accept_rows=rows,
                            log_accept=[0.0] * len(rows), phase_rows={1: rows},
                            log_phase={1: list(np.log(scores[rows]))}, pending_rows=[], known=known,
                            best_score=float(scores[best]), leaders=[best], oom_rows=[])

    first = sampler.choose(table, observations(set(rows)), {1: 1.0})
    assert first is not None and not table.shallow[first]
    left = int(deep[-1]) if int(deep[-1]) not in rows else int(deep[0])
    only_one = sampler.choose(table, observations(set(deep.tolist()) - {left}), {1: 1.0})
    assert only_one == left  # the last deep-enough tree, though every shallow one is unmeasured
    then = sampler.choose(table, observations(set(deep.tolist())), {1: 1.0})
    assert then is not None and table.shallow[then]
