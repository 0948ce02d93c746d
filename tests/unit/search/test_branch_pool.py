"""The grey-box sampler in a space with branches: a branch that cannot win is left alone
(tuner/search/branch_pool.py)."""

from __future__ import annotations

import numpy as np

from tuner.search.branch_pool import HOLD, MIN_TRIALS, still_winnable


def test_a_branch_stops_when_its_bound_or_its_measured_best_cannot_win() -> None:
    labels = np.array([0] * 10 + [1] * 10)  # two branches of ten candidates
    rows = np.arange(20)
    bound = np.where(labels == 0, 3.0, 1.5)
    ranked = [(2.0, 0)]
    # Branch 1's optimistic bound (1.5) is below the best measured (2.0).
    assert set(np.flatnonzero(still_winnable(labels, rows, bound, ranked))) == set(range(10))
    # Branch 0, measured MIN_TRIALS times and best under HOLD of branch 1's best, stops despite its bound.
    bound = np.full(20, 5.0)
    ranked = [(2.0, 11)] + [(2.0 * HOLD - 0.01 * (i + 1), i) for i in range(MIN_TRIALS)]
    assert set(np.flatnonzero(still_winnable(labels, rows, bound, ranked))) == set(range(10, 20))
    # ... but not while its own spread (best ÷ median) says refinement there could still reach the best.
    ranked = [(2.0, 11), (1.6, 0), (1.0, 1), (1.0, 2)]
    assert still_winnable(labels, rows, bound, ranked).all()
    # A near tie is never stopped by the measured rule.
    ranked = [(2.0, 11)] + [(2.0 * HOLD + 0.01, i) for i in range(MIN_TRIALS)]
    assert still_winnable(labels, rows, bound, ranked).all()
    # No bound reaches the best score: still nothing on the branch its measured trials stopped.
    ranked = [(2.0, 11)] + [(2.0 * HOLD - 0.01 * (i + 1), i) for i in range(MIN_TRIALS)]
    assert set(np.flatnonzero(still_winnable(labels, rows, np.zeros(20), ranked))) == set(range(10, 20))
    # Nothing measured, or no branch can win and none is stopped: every row stays.
    assert still_winnable(labels, rows, bound, []).all()
    assert still_winnable(labels, rows, np.zeros(20), [(2.0, 0)]).all()
