"""The report's latency plot draws each trial's 95 % interval as asymmetric error bars."""

from __future__ import annotations

import pytest

from tuner.report.figures import _interval_bars


def test_bars_reach_each_bound_and_a_phase_without_an_interval_gets_none() -> None:
    bars = _interval_bars([{"ttft_p50_ms": 50.0, "ttft_p50_ms_ci": [45.0, 60.0]},
                           {"ttft_p50_ms": 40.0}], "ttft_p50_ms")
    assert bars["array"] == pytest.approx([10.0, 0.0])
    assert bars["arrayminus"] == pytest.approx([5.0, 0.0])
    assert bars["symmetric"] is False and bars["visible"] is True


def test_a_study_stored_before_latency_intervals_draws_no_bars() -> None:
    assert _interval_bars([{"itl_mean_ms": 8.0}], "itl_mean_ms")["visible"] is False
