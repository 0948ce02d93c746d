from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from objectives import metrics
from objectives.records import ErrorKind, RequestRecord


def rec(index: int = 0, start: float = 0.0, times: tuple[float, ...] = (0.1, 0.2, 0.4),
        tokens: tuple[int, ...] = (1, 3, 2), end: float | None = None,
        **kw: object) -> RequestRecord:
    return RequestRecord(index=index, start_s=start, end_s=times[-1] if end is None else end,
                         chunk_times_s=times, chunk_tokens=tokens, output_tokens=sum(tokens),
                         **kw)  # type: ignore[arg-type]


def test_decode_speed_excludes_the_first_chunk_and_its_tokens() -> None:
    # 5 tokens after the first chunk, over 0.3 s
    assert metrics.decode_tok_s(rec()) == pytest.approx(5 / 0.3)
    assert metrics.decode_tok_s(rec(times=(0.1,), tokens=(4,))) is None


def test_tpot_follows_bench_serving() -> None:
    # (E2E − TTFT) / (out − 1) = (0.5 − 0.1) / 5
    assert metrics.tpot_s([rec(end=0.5)]) == [pytest.approx(0.08)]


def test_itl_is_per_token_with_each_gap_split_over_its_chunk() -> None:
    itl = metrics.itl_s([rec()])
    # gap 0.1 carries 3 tokens, gap 0.2 carries 2 tokens
    assert sorted(itl.tolist()) == pytest.approx([0.1 / 3] * 3 + [0.1] * 2)


def test_window_counts_tokens_of_cancelled_requests_only_up_to_its_end() -> None:
    done = rec(start=0.0)
    running = rec(index=1, start=0.5, times=(0.1, 0.3, 0.9), tokens=(1, 3, 4), cancelled=True)
    failed = rec(index=2, error_kind=ErrorKind.DISCONNECT)
    # window 1.0: the cancelled request's chunks at 0.6 and 0.8 count, the one at 1.4 does not
    assert metrics.tokens_in_window([done, running, failed], 1.0) == 6 + 1 + 3
    assert metrics.aggregate_tok_s([done, running, failed], 1.0) == pytest.approx(10.0)


def test_error_rate_and_kinds_ignore_requests_cancelled_at_a_normal_stop() -> None:
    records = [rec(), rec(index=1, error_kind=ErrorKind.HTTP_5XX),
               rec(index=2, error_kind=ErrorKind.HTTP_5XX),
               rec(index=3, error_kind=ErrorKind.STALL), rec(index=4, cancelled=True)]
    assert metrics.error_rate(records) == pytest.approx(3 / 4)
    assert metrics.errors_by_kind(records) == {"http_5xx": 2, "stall": 1}
    assert metrics.request_rate(records, 2.0) == pytest.approx(0.5)


def test_achieved_concurrency_clips_requests_to_the_window() -> None:
    records = [rec(start=0.0, end=1.0), rec(index=1, start=0.5, end=1.0, cancelled=True)]
    # busy: 1.0 + 0.5 (second clipped at the window end 1.0)
    assert metrics.achieved_concurrency(records, 1.0) == pytest.approx(1.5)


def test_summary_uses_numpy_linear_percentiles() -> None:
    s = metrics.Summary.of([1.0, 2.0, 3.0, 4.0], scale=1000)
    assert s.mean == pytest.approx(2500.0)
    assert s.p50 == pytest.approx(2500.0)
    assert s.p99 == pytest.approx(float(np.percentile([1, 2, 3, 4], 99)) * 1000)
    assert metrics.Summary.of([]).p90 is None


def test_tokens_per_chunk_is_the_clients_accept_length() -> None:
    assert metrics.tokens_per_chunk([rec(), rec(index=1, tokens=(1, 4, 4))]) == pytest.approx(
        (5 + 8) / 4)


def test_a_time_scaled_phase_reads_as_the_real_server() -> None:
    from objectives.results import METRICS, PhaseResult
    from objectives.spec import PhaseSpec

    values = {name: 10.0 for name in METRICS}
    phase = PhaseResult(spec=PhaseSpec(1), stopped_by="requests", duration_s=2.0, completed=4,
                        failed=0, cancelled=0,
                        errors={}, output_tokens=400, tokens_exact=True, ci_half_width=None,
                        warmup_failed=0, accept_length_source="metrics", **values)
    real = phase.at_time_scale(50.0)
    assert real.aggregate_tok_s == 0.2 and real.per_request_tok_s_median == 0.2 \
           and real.request_rate == 0.2
    assert real.ttft_p99_ms == 500.0 and real.duration_s == 100.0
    assert real.accept_length == 10.0 and real.error_rate == 10.0 and real.output_tokens == 400
    assert phase.at_time_scale(1.0) is phase


@given(st.lists(st.tuples(st.floats(min_value=0.0, max_value=10.0),
                          st.integers(min_value=1, max_value=50)),
                min_size=1, max_size=40))
def test_weighted_summary_equals_the_summary_of_the_repeated_sample(
        pairs: list[tuple[float, int]]) -> None:
    values = np.asarray([v for v, _ in pairs])
    weights = np.asarray([w for _, w in pairs])
    expected = metrics.Summary.of(np.repeat(values, weights), 1000)
    got = metrics.Summary.weighted(values, weights, 1000)
    for name in ("mean", "p50", "p90", "p99"):
        assert getattr(got, name) == pytest.approx(getattr(expected, name), rel=1e-9, abs=1e-9), \
               name


def test_itl_summary_never_expands_per_token() -> None:
    # a (bounded) record whose one chunk claims 10^9 tokens: the per-token sample would take 8 GB
    big = rec(times=(0.1, 0.2, 1.1), tokens=(1, 1, 10**9))
    tracemalloc.start()
    try:
        summary = metrics.itl_summary([big, rec(index=1)], 1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    # the 10^9 gaps of 0.9 / 10^9 s (in ms): the median
    assert summary.p50 == pytest.approx(0.9 / 10**9 * 1000)
    assert metrics.itl_summary([]).mean is None
