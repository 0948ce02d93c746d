from __future__ import annotations

import pytest

from objectives import metrics
from objectives.latency_intervals import LATENCY_INTERVALS, latency_intervals
from objectives.records import ErrorKind, RequestRecord
from objectives.results import PhaseResult
from objectives.scoring import pooled_phase
from tests.helpers import requests_of


def test_each_interval_holds_its_figure_and_narrows_with_morerequests_of() -> None:
    few, many = requests_of(16), requests_of(400)
    for records in (few, many):
        intervals = latency_intervals(records)
        assert set(intervals) == set(LATENCY_INTERVALS)
        ttft = metrics.Summary.of(metrics.ttft_s(records), 1000)
        itl = metrics.itl_summary(records, 1000)
        for name, value in (("ttft_p50_ms", ttft.p50), ("ttft_p99_ms", ttft.p99),
                            ("itl_mean_ms", itl.mean)):
            low, high = intervals[name]
            assert value is not None and low <= value <= high, name
    width = {n: latency_intervals(r)["ttft_p50_ms"] for n, r in (("few", few), ("many", many))}
    assert width["many"][1] - width["many"][0] < (width["few"][1] - width["few"][0]) / 2


def test_the_same_requests_give_the_same_interval() -> None:
    assert latency_intervals(requests_of(64)) == latency_intervals(requests_of(64))


def test_an_interval_covers_the_true_median_about_95_times_in_100() -> None:
    # TTFT lognormal(log 50 ms, 0.4): its median is 50 ms
    covered = 0
    for seed in range(100):
        low, high = latency_intervals(requests_of(60, seed))["ttft_p50_ms"]
        covered += low <= 50.0 <= high
    assert 88 <= covered <= 99


def test_failed_requests_and_a_single_request_give_no_interval() -> None:
    failed = RequestRecord(index=1, start_s=0.0, end_s=1.0, chunk_times_s=(), chunk_tokens=(),
                           output_tokens=0, error_kind=ErrorKind.HTTP_5XX)
    assert latency_intervals([requests_of(1)[0], failed]) == {}


def test_pooled_runs_keep_an_interval_around_their_mean() -> None:
    runs = [{"ttft_p50_ms": 50.0, "ttft_p50_ms_ci": [46.0, 56.0]},
            {"ttft_p50_ms": 52.0, "ttft_p50_ms_ci": [48.0, 58.0]}]
    pooled = pooled_phase(runs)
    assert pooled["ttft_p50_ms"] == pytest.approx(51.0)
    # each side in quadrature over two runs: 51 − √(4² + 4²)/2, 51 + √(6² + 6²)/2
    assert pooled["ttft_p50_ms_ci"] == pytest.approx([51.0 - 8 ** 0.5, 51.0 + 18 ** 0.5])
    assert pooled_phase([runs[0], {"ttft_p50_ms": 52.0}])["ttft_p50_ms_ci"] is None


def test_a_time_scaled_phase_scales_its_latency_intervals() -> None:
    from objectives.results import METRICS
    from objectives.spec import PhaseSpec

    values = {name: 10.0 for name in METRICS}
    phase = PhaseResult(spec=PhaseSpec(1), stopped_by="requests", duration_s=2.0, completed=4,
                        failed=0, cancelled=0, errors={}, output_tokens=400, tokens_exact=True,
                        ci_half_width=None, warmup_failed=0, accept_length_source="metrics",
                        ttft_p50_ms_ci=(8.0, 12.0), itl_mean_ms_ci=(9.0, 11.0), **values)
    real = phase.at_time_scale(50.0)
    assert real.ttft_p50_ms_ci == (400.0, 600.0) and real.itl_mean_ms_ci == (450.0, 550.0)
    assert real.ttft_p99_ms_ci is None
