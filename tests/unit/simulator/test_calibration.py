"""The seed profile reproduces the seed campaign's measured table (../shared/DESIGN.md) cell by
cell, with its shape — the property that makes the simulator a fair stand-in for the real server
when judging a tuner."""

from __future__ import annotations

import pytest

from tuner.simulator.ground_truth import SEED_WORKLOAD, expected_metrics
from tuner.simulator.profile import DEFAULT_PROFILE

#: concurrency → measured value for speculative-num-steps 1..5 (C=1, C=4 per-request tok/s; C=64
#: aggregate).
SEED_TABLE = {
    1: (123, 186, 234, 277, 282),
    4: (119, 162, 200, 236, None),
    64: (1582, 1844, 1914, 1817, None),
}
BASE = [
    "--model-path", "Qwen/Qwen3.5-122B-A10B", "--tp-size", "4", "--speculative-algorithm", "EAGLE3",
    "--speculative-draft-model-path", "Qwen3.5-122B-A10B-EAGLE3", "--speculative-eagle-topk", "1",
    "--max-running-requests", "64",
]


def seed_value(steps: int, concurrency: int) -> float:
    args = [*BASE, "--speculative-num-steps", str(steps), "--speculative-num-draft-tokens",
            str(steps + 1)]
    m = expected_metrics(DEFAULT_PROFILE, args, SEED_WORKLOAD, concurrency)
    return m.aggregate_tok_s if concurrency == 64 else m.per_request_tok_s


@pytest.mark.parametrize(("concurrency", "steps"),
                         [(c, s) for c, row in SEED_TABLE.items() for s, v in enumerate(row, 1)
                          if v is not None])
def test_every_cell_of_the_seed_table_within_8_percent(concurrency: int, steps: int) -> None:
    measured = SEED_TABLE[concurrency][steps - 1]
    assert seed_value(steps, concurrency) == pytest.approx(measured, rel=0.08)


def test_c1_still_rises_from_steps_4_to_5_by_under_5_percent() -> None:
    rise = seed_value(5, 1) / seed_value(4, 1) - 1.0
    assert 0.0 < rise < 0.05


def test_c64_aggregate_is_highest_at_steps_3() -> None:
    by_steps = {steps: seed_value(steps, 64) for steps in range(1, 9)}
    assert max(by_steps, key=by_steps.__getitem__) == 3


def test_per_request_speed_falls_with_concurrency_at_every_depth() -> None:
    for steps in range(1, 6):
        assert seed_value(steps, 1) > seed_value(steps, 4) > seed_value(steps, 64) / 64
