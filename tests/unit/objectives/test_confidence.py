from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from objectives.confidence import relative_half_width


def test_a_perfectly_steady_stream_has_a_tight_interval() -> None:
    arrivals = np.arange(0.0, 10.0, 0.01)
    width = relative_half_width(arrivals, np.full(arrivals.size, 3.0), 10.0)
    assert width is not None and width < 0.01


def test_bursty_arrivals_give_a_wide_interval() -> None:
    rng = np.random.default_rng(1)
    arrivals = np.concatenate([rng.uniform(0, 1, 500), rng.uniform(9, 10, 20)])
    width = relative_half_width(arrivals, np.ones(arrivals.size), 10.0)
    assert width is not None and width > 0.5


def test_matches_the_batch_means_formula() -> None:
    arrivals = np.array([0.5, 1.5, 1.6, 2.5, 3.5, 3.6, 3.7, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5])
    tokens = np.ones(arrivals.size)
    rates = np.array([1, 2, 1, 3, 1, 1, 1, 1, 1, 1], dtype=float)  # per 1-s batch
    expected = stats.t.ppf(0.975, 9) * rates.std(ddof=1) / np.sqrt(10) / rates.mean()
    assert relative_half_width(arrivals, tokens, 10.0) == pytest.approx(expected)


def test_nothing_to_say_without_data() -> None:
    assert relative_half_width(np.empty(0), np.empty(0), 5.0) is None
    assert relative_half_width(np.array([1.0]), np.array([1.0]), 0.0) is None
