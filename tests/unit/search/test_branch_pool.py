"""The grey-box sampler in a space with branches: a branch that cannot win is left alone
(tuner/search/branch_pool.py)."""

from __future__ import annotations

import numpy as np

from tuner.search.branch_pool import (
    HOLD,
    MIN_TRIALS,
    SHARE,
    over_share,
    still_winnable,
    untried_own_flags,
    untried_twin,
)
from tuner.search.trust_region import rung_table


def test_a_branch_stops_when_its_bound_or_its_measured_best_cannot_win() -> None:
    labels = np.array([0] * 10 + [1] * 10)  # two branches of ten candidates
    rows = np.arange(20)
    bound = np.where(labels == 0, 3.0, 1.5)
    ranked = [(2.0, 0)]
    # Branch 1's optimistic bound (1.5) is below the best measured (2.0).
    assert set(np.flatnonzero(still_winnable(labels, rows, bound, ranked))) == set(range(10))
    # Branch 0, measured MIN_TRIALS times and best under HOLD of branch 1's best, stops despite its
    # bound.
    bound = np.full(20, 5.0)
    ranked = [(2.0, 11)] + [(2.0 * HOLD - 0.01 * (i + 1), i) for i in range(MIN_TRIALS)]
    assert set(np.flatnonzero(still_winnable(labels, rows, bound, ranked))) == set(range(10, 20))
    # ... but not while its own spread (best ÷ median) says refinement there could still reach the
    # best.
    ranked = [(2.0, 11), (1.6, 0), (1.0, 1), (1.0, 2)]
    assert still_winnable(labels, rows, bound, ranked).all()
    # A near tie is never stopped by the measured rule.
    ranked = [(2.0, 11)] + [(2.0 * HOLD + 0.01, i) for i in range(MIN_TRIALS)]
    assert still_winnable(labels, rows, bound, ranked).all()
    # No bound reaches the best score: still nothing on the branch its measured trials stopped.
    ranked = [(2.0, 11)] + [(2.0 * HOLD - 0.01 * (i + 1), i) for i in range(MIN_TRIALS)]
    assert set(np.flatnonzero(still_winnable(labels, rows, np.zeros(20), ranked))) \
           == set(range(10, 20))
    # Nothing measured, or no branch can win and none is stopped: every row stays.
    assert still_winnable(labels, rows, bound, []).all()
    assert still_winnable(labels, rows, np.zeros(20), [(2.0, 0)]).all()


def test_a_trailing_branch_gets_its_own_flags_moved_to_their_ends_and_middle() -> None:
    # Branch 0: six candidates along a shared input (column 0). Branch 1: its own input (column 1,
    # three values, constant elsewhere) crossed with two values of the shared one.
    labels = np.array([0] * 6 + [1] * 6)
    x = np.array([[v, 0.0] for v in np.linspace(0, 1, 6)]
                 + [[a, b] for a in (0.0, 1.0) for b in (0.0, 0.5, 1.0)])
    rungs = rung_table(x)
    everything = np.ones(12, dtype=bool)
    open_rows = everything.copy()
    open_rows[[0, 7]] = False
    # Branch 1's start (row 7: its own input at the middle) nearly ties the leader: its best with
    # the own input at either end, the shared one unchanged.
    ranked = [(2.0, 0), (1.9, 7)]
    moved = untried_own_flags(labels, x, rungs, ranked, open_rows)
    assert moved is not None and set(np.flatnonzero(moved)) == {6, 8}
    open_rows[6] = False
    moved = untried_own_flags(labels, x, rungs, [*ranked, (1.2, 6)], open_rows)
    assert moved is not None and set(np.flatnonzero(moved)) == {8}
    # Every level measured, a branch that cannot win (under HOLD of the best), the leader's own
    # branch (the trust region refines it), or no branches: no design.
    open_rows[8] = False
    assert untried_own_flags(labels, x, rungs, [*ranked, (1.2, 6), (1.0, 8)], open_rows) is None
    losing = [(2.0, 0), (2.0 * HOLD - 0.1, 7)]
    assert untried_own_flags(labels, x, rungs, losing, everything) is None
    assert untried_own_flags(labels, x, rungs, [(2.0, 7), (1.9, 0)], everything) is None
    assert untried_own_flags(np.zeros(12, dtype=int), x, rungs, ranked, everything) is None


def _two_trees() -> tuple[np.ndarray, np.ndarray]:
    """Two branches over the same four trees (column 0), told apart by a one-hot input (columns 1
    and 2), and a third branch without the tree (column 0 held at 0)."""
    labels = np.array([0] * 4 + [1] * 4 + [2])
    x = np.array([[t, 1.0, 0.0] for t in range(4)] + [[t, 0.0, 1.0] for t in range(4)]
                 + [[0.0, 0.0, 0.0]])
    return labels, x


def test_the_best_trial_is_tried_on_each_branch_that_shares_its_inputs() -> None:
    labels, x = _two_trees()
    open_rows = np.ones(9, dtype=bool)
    open_rows[[2, 4]] = False  # measured: branch 0's tree 2 (the best) and branch 1's tree 0
    twin = untried_twin(labels, x, [(2.0, 2), (1.2, 4)], open_rows)
    # Branch 1's tree 2, although branch 1's one trial is far below the best; never branch 2's
    # candidate (no tree: it differs on an input that is not the branch's).
    assert twin is not None and set(np.flatnonzero(twin)) == {6}
    # The twin measured, a branch its trials stopped, or no branches: nothing to propose first.
    open_rows[6] = False
    assert untried_twin(labels, x, [(2.0, 2), (1.9, 6), (1.2, 4)], open_rows) is None
    stopped = [(2.0, 2)] + [(2.0 * HOLD - 0.01 * i, 4 + i) for i in range(1, MIN_TRIALS + 1)]
    assert untried_twin(labels, x, stopped, np.ones(9, dtype=bool)) is None
    assert untried_twin(np.zeros(9, dtype=int), x, [(2.0, 2)], np.ones(9, dtype=bool)) is None


def test_a_branch_that_lost_on_the_same_inputs_keeps_its_share_of_the_trials() -> None:
    labels, x = _two_trees()
    # Branch 1 lost to branch 0 on tree 0 (rows 0 and 4), and has MIN_TRIALS trials out of few:
    # with one more it would pass SHARE of them.
    ranked = [(2.0, 0), (1.9, 4), (1.5, 1), (1.4, 5), (1.3, 6)]
    few = [0, 1, 4, 5, 6]
    assert SHARE * (len(few) + 1) < MIN_TRIALS + 1
    held = over_share(labels, x, few, ranked)
    assert held is not None and set(np.flatnonzero(held)) == {4, 5, 6, 7}
    # The leader's branch is never held, whatever its share.
    assert over_share(labels, x, few, [(2.0, 4), (1.9, 0)]) is None
    # Not held: a branch that won a comparison on the same inputs (tree 1: rows 1 and 5) or never
    # met the leader's branch on them (branch 2 has no tree), below MIN_TRIALS (a branch's start
    # and its own flags' design), within its share of many trials, or without branches.
    assert over_share(labels, x, few, [(2.0, 0), (1.9, 4), (1.6, 5), (1.5, 1)]) is None
    # ... unless it lost on the whole (one pair can flip with the noise of two measurements).
    held = over_share(labels, x, few, [(2.0, 0), (1.5, 4), (1.55, 5), (1.5, 1)])
    assert held is not None and set(np.flatnonzero(held)) == {4, 5, 6, 7}
    apart = [(2.0, 0), (1.9, 8), (1.5, 1)]
    assert over_share(labels, x, [0, 1, 8, 8, 8], apart) is None
    assert over_share(labels, x, [0, 1, 4, 5], ranked) is None
    many = [0] * 20 + [4, 5, 6]
    assert SHARE * (len(many) + 1) >= MIN_TRIALS + 1
    assert over_share(labels, x, many, ranked) is None
    assert over_share(np.zeros(9, dtype=int), x, few, ranked) is None
