"""Paired intervals (objectives/paired.py): a run against the reference run's same requests."""

from __future__ import annotations

import numpy as np
import pytest

from objectives.confidence import MeanSample
from objectives.paired import PerRequest, pooled, relative_interval
from objectives.scoring import Scorer, pooled_phase, with_paired
from tuner.store.confirmed import confirmations


def _prompts(n: int, seed: int = 1) -> np.ndarray:
    """Per-prompt speeds that differ a lot (lengths, predictability): the spread pairing removes."""
    return np.random.default_rng(seed).uniform(80, 260, n)


def _mean(values: np.ndarray, first: int = 0) -> PerRequest:
    return PerRequest("mean", tuple(range(first, first + values.size)),
                      tuple(float(v) for v in values))


def test_a_paired_interval_sees_the_configuration_not_the_prompts() -> None:
    ref = _prompts(8)
    # 10 % faster on every prompt, ±1 % noise
    run = ref * 1.10 * np.random.default_rng(2).normal(1.0, 0.01, 8)
    low, high = relative_interval(_mean(run), _mean(ref))  # type: ignore[misc]
    ratio = run.mean() / ref.mean()
    assert low < 1 < high and ratio * low < 1.10 < ratio * high and high - low < 0.03
    unpaired = MeanSample.of(run).interval()  # the figure's own interval: the prompts' spread
    assert unpaired is not None and (unpaired.high - unpaired.low) / run.mean() > 10 * (high - low)


def test_the_reference_run_pairs_with_itself_exactly_and_unmatched_requests_are_left_out() -> None:
    ref = _prompts(6)
    assert relative_interval(_mean(ref), _mean(ref)) == (1.0, 1.0)
    # two pairs say nothing about the spread
    assert relative_interval(_mean(ref[:2]), _mean(ref)) is None
    shifted = relative_interval(_mean(ref * 1.2, first=3), _mean(ref))  # requests 3..5 of both
    assert shifted is not None and shifted[0] < 1 < shifted[1]


def test_the_aggregates_interval_is_a_seeded_paired_bootstrap() -> None:
    rng = np.random.default_rng(3)
    tokens = rng.integers(50, 256, 64).astype(float)
    busy = tokens / 30 * rng.normal(1, 0.02, 64)
    faster = busy / 1.05 * rng.normal(1, 0.02, 64)
    ref = PerRequest("ratio", tuple(range(64)), tuple(tokens), tuple(busy))
    run = PerRequest("ratio", tuple(range(64)), tuple(tokens), tuple(faster))
    first, again = relative_interval(run, ref), relative_interval(run, ref)
    # deterministic: the same data give the same interval
    assert first == again and first is not None
    ratio = (tokens.sum() / faster.sum()) / (tokens.sum() / busy.sum())
    assert ratio * first[0] < 1.05 * 1.02 and first[0] < 1 < first[1] and first[1] - first[0] < 0.03
    assert relative_interval(run, _mean(tokens)) is None  # different kinds never pair
    assert PerRequest.from_dict(run.to_dict()) == run \
           and PerRequest.from_dict({"kind": "x"}) is None
    assert run.scaled(25.0).x[0] == pytest.approx(faster[0] * 25)


def test_scores_use_the_paired_interval_and_confirmed_runs_pair_run_by_run() -> None:
    ref_speeds, ref_parts = _prompts(8), _prompts(8, seed=5)

    def phases(factor: float, seed: int) -> dict[int, dict[str, object]]:
        noise = np.random.default_rng(seed).normal(1, 0.01, 8)
        speeds = ref_speeds * factor * noise
        parts = PerRequest("ratio", tuple(range(8)), tuple(ref_parts),
                           tuple(ref_parts / 30 / factor * noise))
        sample = MeanSample.of(speeds)
        ci = sample.interval()
        assert ci is not None
        return {1: {"per_request_tok_s_mean": float(speeds.mean()),
                    "per_request_tok_s_mean_ci": ci.to_list(),
                    "per_request": _mean(speeds).to_dict(), "samples": {}},
                64: {"aggregate_tok_s": 1000 * factor,
                     "aggregate_tok_s_ci": [900 * factor, 1100 * factor],
                     "per_request": parts.to_dict(), "samples": {}}}

    reference, candidate = phases(1.0, 7), phases(1.1, 8)
    scorer = Scorer({1: 0.5, 64: 0.5},
                    {1: reference[1]["per_request_tok_s_mean"], 64: 1000.0})  # type: ignore[dict-item]
    plain, paired = scorer.interval(candidate), scorer.interval(with_paired(candidate, reference))
    assert plain is not None and paired is not None \
           and paired.high - paired.low < (plain.high - plain.low) / 5
    own = scorer.interval(with_paired(reference, reference))
    assert own is not None and own.low == own.high  # the reference's score is exactly its own
    # the confirmation stage: run k of a candidate pairs with run k of the confirmed baseline
    stored = {"baseline": 0,
              "trials": {"0": {"runs": [{str(c): p for c, p in phases(1.0, s).items()}
                                        for s in (11, 12)], "failed": 0},
                         "3": {
                             "runs": [{str(c): p for c, p in phases(1.1, s).items()}
                                      for s in (13, 14)], "failed": 0}}}
    confirmed = confirmations(stored)
    base, best = confirmed[0].pooled, confirmed[3].pooled
    assert base[64]["aggregate_tok_s_paired_ci"] == [base[64]["aggregate_tok_s"]] * 2
    low, high = best[1]["per_request_tok_s_mean_paired_ci"]
    assert low < best[1]["per_request_tok_s_mean"] < high
    together = pooled(PerRequest.from_dict(r[1]["per_request"])  # type: ignore[misc]
                      for r in confirmed[3].runs)
    assert together is not None and len(together.index) == 16 and pooled_phase(
        [r[1] for r in confirmed[3].runs])["per_request"] == together.to_dict()
