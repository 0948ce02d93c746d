"""The 95 % intervals of objectives/confidence.py and the score's (objectives/scoring.py), against
scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from objectives import metrics
from objectives.confidence import Interval, MeanSample, RatioSample, aggregate_sample, pool
from objectives.records import ErrorKind, RequestRecord
from objectives.scoring import Scorer, pooled_phase

SPEEDS = np.array([101.0, 95.0, 120.0, 88.0, 110.0, 99.0, 104.5, 91.2])


def test_the_mean_interval_is_scipys_t_interval() -> None:
    reference = stats.ttest_1samp(SPEEDS, 0.0).confidence_interval(0.95)
    interval = MeanSample.of(SPEEDS).interval()
    assert interval is not None
    assert (interval.low, interval.high) == pytest.approx((reference.low, reference.high),
                                                          rel=1e-12)


def test_pooled_samples_are_the_interval_of_all_values_together() -> None:
    first, second = SPEEDS[:3], SPEEDS[3:]
    pooled = pool([MeanSample.of(first), MeanSample.of(second)])
    reference = stats.ttest_1samp(SPEEDS, 0.0).confidence_interval(0.95)
    assert isinstance(pooled, MeanSample) and pooled.n == SPEEDS.size
    interval = pooled.interval()
    assert interval is not None \
           and (interval.low, interval.high) == pytest.approx((reference.low, reference.high))


def test_a_scaled_sample_is_the_sample_of_the_scaled_values() -> None:
    scaled = MeanSample.of(SPEEDS).scaled(1 / 50).interval()
    direct = MeanSample.of(SPEEDS / 50).interval()
    assert scaled is not None and direct is not None
    assert (scaled.low, scaled.high) == pytest.approx((direct.low, direct.high))


def test_one_value_has_no_interval() -> None:
    assert MeanSample.of([100.0]).interval() is None
    assert RatioSample.of([10.0], [1.0], 1.0).interval() is None


def _requests() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)  # fixed data: a closed loop's requests of varied length
    tokens = rng.integers(40, 256, 300).astype(float)
    # decode + prefill/queue
    busy = tokens / rng.normal(30.0, 4.0, 300) + rng.uniform(0.05, 0.4, 300)
    return tokens, busy


def test_the_aggregate_interval_matches_scipys_bootstrap() -> None:
    tokens, busy = _requests()
    window = busy.sum() / 64  # 64 in flight all along
    sample = RatioSample.of(tokens, busy, window)
    assert sample.estimate == pytest.approx(tokens.sum() / window)

    def aggregate(y: np.ndarray, x: np.ndarray, axis: int = -1) -> np.ndarray:
        # the ratio Σy/Σx, times the (fixed) achieved concurrency Σx/window of the whole phase
        return np.sum(y, axis=axis) / np.sum(x, axis=axis) * (busy.sum() / window)

    reference = stats.bootstrap((tokens, busy), aggregate, paired=True, vectorized=True,
                                n_resamples=4999, confidence_level=0.95, method="percentile",
                                random_state=0).confidence_interval
    interval = sample.interval()
    assert interval is not None
    # The delta method and the bootstrap agree to within a few per cent of the half-width on 300
    # requests.
    half, ref_half = (interval.high - interval.low) / 2, (reference.high - reference.low) / 2
    assert half == pytest.approx(ref_half, rel=0.1)
    assert (interval.low + interval.high) / 2 == pytest.approx((reference.low + reference.high) / 2,
                                                               rel=0.01)


def test_the_aggregate_sample_is_what_aggregate_tok_s_counts() -> None:
    def rec(index: int, start: float, times: tuple[float, ...], tokens: tuple[int, ...],
            **kw: object) -> RequestRecord:
        return RequestRecord(index=index, start_s=start, end_s=times[-1], chunk_times_s=times,
                             chunk_tokens=tokens,
                             output_tokens=sum(tokens), **kw)  # type: ignore[arg-type]

    records = [rec(0, 0.0, (0.1, 0.2, 0.4), (1, 3, 2)), rec(1, 0.2, (0.1, 0.5), (1, 4)),
               rec(2, 0.5, (0.1, 0.3, 0.9), (1, 3, 4), cancelled=True),
               rec(3, 0.1, (0.2,), (0,), error_kind=ErrorKind.DISCONNECT)]
    sample = aggregate_sample(records, 1.0)
    assert sample.estimate == pytest.approx(metrics.aggregate_tok_s(records, 1.0))
    assert sample.sx == pytest.approx(metrics.achieved_concurrency(records, 1.0))  # window 1 s


def test_pooled_ratio_samples_add_up() -> None:
    tokens, busy = _requests()
    a = RatioSample.of(tokens[:100], busy[:100], 2.0)
    b = RatioSample.of(tokens[100:], busy[100:], 3.0)
    both = pool([a, b])
    assert isinstance(both, RatioSample)
    assert both.estimate == pytest.approx(tokens.sum() / 5.0)
    got, want = both.interval(), RatioSample.of(tokens, busy, 5.0).interval()
    assert got is not None and want is not None
    assert (got.low, got.high) == pytest.approx((want.low, want.high))
    assert pool([a, MeanSample.of(SPEEDS)]) is None


def _phase(speeds: np.ndarray, tokens: np.ndarray, busy: np.ndarray,
           window: float) -> dict[str, object]:
    mean, ratio = MeanSample.of(speeds), RatioSample.of(tokens, busy, window)
    mi, ri = mean.interval(), ratio.interval()
    assert mi is not None and ri is not None
    return {"per_request_tok_s_mean": mean.estimate, "per_request_tok_s_mean_ci": mi.to_list(),
            "aggregate_tok_s": ratio.estimate, "aggregate_tok_s_ci": ri.to_list(),
            "error_rate": 0.0, "samples": {"per_request_tok_s_mean": mean.to_dict(),
                        "aggregate_tok_s": ratio.to_dict()}}


def test_the_score_interval_is_the_delta_method_over_the_phases() -> None:
    tokens, busy = _requests()
    metrics_ = {1: _phase(SPEEDS, tokens, busy, 5.0), 64: _phase(SPEEDS, tokens, busy, 5.0)}
    refs = {1: 100.0, 64: 1000.0}
    scorer = Scorer({1: 0.5, 64: 0.5}, refs)
    interval = scorer.interval(metrics_)
    assert interval is not None
    h1 = (metrics_[1]["per_request_tok_s_mean_ci"][1]
          - metrics_[1]["per_request_tok_s_mean_ci"][0]) / 2  # type: ignore[index]
    h64 = (metrics_[64]["aggregate_tok_s_ci"][1]
           - metrics_[64]["aggregate_tok_s_ci"][0]) / 2  # type: ignore[index]
    expected = np.hypot(0.5 * h1 / refs[1], 0.5 * h64 / refs[64])
    assert (interval.high - interval.low) / 2 == pytest.approx(expected)
    assert (interval.high + interval.low) / 2 == pytest.approx(scorer.score(metrics_))
    # a phase without an interval (a study from before intervals, a skipped phase): no score
    # interval
    assert scorer.interval({1: metrics_[1]}) is None


def test_repeated_phases_pool_into_one_figure() -> None:
    tokens, busy = _requests()
    runs = [_phase(SPEEDS[:4], tokens[:150], busy[:150], 2.5),
            _phase(SPEEDS[4:], tokens[150:], busy[150:], 2.5)]
    pooled = pooled_phase(runs)
    assert pooled["runs"] == 2
    assert pooled["aggregate_tok_s"] == pytest.approx(tokens.sum() / 5.0)
    assert pooled["per_request_tok_s_mean"] == pytest.approx(SPEEDS.mean())
    reference = stats.ttest_1samp(SPEEDS, 0.0).confidence_interval(0.95)
    assert pooled["per_request_tok_s_mean_ci"] == pytest.approx([reference.low, reference.high])
    assert Interval(*pooled["aggregate_tok_s_ci"]).overlaps(
        Interval(*runs[0]["aggregate_tok_s_ci"]))  # type: ignore[misc]


def test_an_interval_prints_one_way_everywhere() -> None:
    interval = Interval(0.96149, 1.0344)
    assert interval.text() == "[0.961, 1.034]"
    assert interval.text(1) == "[1.0, 1.0]"
    assert interval.mid == pytest.approx(0.997945)
