"""SGLang's derived settings that shape a tuning result: the 48-request cap and the topk=1 draft
adjustment."""

from __future__ import annotations

from tuner.simulator.config import resolve
from tuner.simulator.ground_truth import SEED_WORKLOAD, expected_metrics
from tuner.simulator.profile import DEFAULT_PROFILE, load_profile

SPEC = ["--model-path", "Qwen/Qwen3.5-122B-A10B", "--tp-size", "4", "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path", "Qwen3.5-122B-A10B-EAGLE3", "--speculative-num-steps",
        "3", "--speculative-eagle-topk", "1"]


def test_speculation_caps_running_requests_at_48_unless_set() -> None:
    profile = load_profile(DEFAULT_PROFILE)
    assert resolve(profile, SPEC).max_running_requests == 48
    assert resolve(profile, [*SPEC, "--max-running-requests", "64"]).max_running_requests == 64
    # ... and C=64 then runs 48 at a time, so its throughput is lower than with the cap lifted.
    capped = expected_metrics(DEFAULT_PROFILE, SPEC, SEED_WORKLOAD, 64)
    lifted = expected_metrics(DEFAULT_PROFILE, [*SPEC, "--max-running-requests", "64"],
                              SEED_WORKLOAD, 64)
    assert capped.running == 48 and lifted.running == 64
    assert capped.aggregate_tok_s < lifted.aggregate_tok_s


def test_topk1_forces_draft_tokens_to_steps_plus_one() -> None:
    config = resolve(load_profile(DEFAULT_PROFILE), [*SPEC, "--speculative-num-draft-tokens", "9"])
    assert config.draft_tokens == 4
    assert any("adjusted to speculative_num_steps + 1" in w for w in config.warnings)
