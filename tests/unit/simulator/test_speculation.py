"""Kinds of speculation in the simulator: SGLang's adaptive steps, MTP (NEXTN), n-gram, STANDALONE,
the overlap scheduler — each against what SGLang does and the calibration docs/simulator.md
states."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from objectives.spec import WorkloadSpec
from tuner.simulator import adaptive, ground_truth
from tuner.simulator.clock import VirtualClock
from tuner.simulator.config import resolve
from tuner.simulator.engine import Engine, GenerationRequest
from tuner.simulator.profile import load_profile
from tuner.simulator.speculation import SpecKind

LLAMA = "llama-3.1-8b-eagle3-1x-h100"
MTP = "qwen3.5-35b-a3b-mtp-1x-h200"
BASE = ["--model-path", "m"]
EAGLE = [*BASE, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"]
W = WorkloadSpec(api="chat", dataset="builtin", input_tokens=256, max_tokens=256, temperature=0.0,
                 ignore_eos=True)


def chain(steps: int) -> list[str]:
    return ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", str(steps + 1)]


def speed(profile: str, argv: list[str], concurrency: int = 1) -> float:
    m = ground_truth.expected_metrics(profile, argv, W, concurrency)
    return m.per_request_tok_s if concurrency == 1 else m.aggregate_tok_s


def test_adaptive_slot_follows_sglangs_thresholds() -> None:
    tier = adaptive.parse_config(adaptive.DEFAULT_CONFIG, None).tiers[0]  # batch 1: [1, 3, 5, 7]
    slot = adaptive.Slot(tier, 3)
    for _ in range(40):  # every draft accepted: it climbs to the top candidate
        slot.update([float(slot.steps)])
    assert slot.steps == 7
    for _ in range(60):  # nothing accepted: down to the floor (1: batch 1 has no 0)
        slot.update([0.0])
    assert slot.steps == 1


def test_adaptive_tiers_route_by_padded_batch() -> None:
    config = adaptive.parse_config(adaptive.DEFAULT_CONFIG, None)
    assert config.candidate_steps == (0, 1, 3, 5, 7) and config.initial_steps == 3
    assert [config.tiers[config.tier_index(b)].batch
            for b in (1, 7, 8, 31, 48, 64, 200)] == [1, 1, 8, 8, 32, 64, 64]
    # 7 pads to the graph size 8
    assert config.tiers[config.tier_index(7, (1, 2, 4, 8, 16))].batch == 8


def test_custom_adaptive_config_is_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "adaptive.json"
    path.write_text(
        json.dumps({"1": {"candidate_steps": [2, 4]}, "16": {"candidate_steps": [0, 2]}}))
    config = resolve(load_profile(LLAMA),
                     [*EAGLE, "--speculative-adaptive", "--speculative-adaptive-config",
                     str(path)], exit_on_error=False)
    assert config.startup_error is None and config.adaptive is not None
    assert config.adaptive.candidate_steps == (0, 2, 4) and config.adaptive.initial_steps == 2
    path.write_text(json.dumps({"fast": True}))
    refused = resolve(load_profile(LLAMA),
                      [*EAGLE, "--speculative-adaptive", "--speculative-adaptive-config",
                      str(path)], exit_on_error=False)
    assert refused.startup_error is not None \
           and "integer-string BS key" in refused.startup_error.message


def test_adaptive_turned_off_with_sglangs_warning_for_topk_above_one() -> None:
    config = resolve(load_profile(LLAMA),
                     [*EAGLE, "--speculative-adaptive", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "2",
                      "--speculative-num-draft-tokens", "6"],
                     exit_on_error=False)
    assert config.adaptive is None and config.startup_error is None
    assert any(w.startswith(
        "speculative_adaptive disabled: speculative_eagle_topk=2 (only topk=1 is supported)")
               for w in config.warnings)


def test_adaptive_stops_speculating_at_large_batches_and_matches_a_static_chain_at_batch_one() -> None:  # noqa: E501 - the test's name says what it checks
    on = [*EAGLE, "--speculative-adaptive", "--max-running-requests", "64"]
    assert speed(LLAMA, on) == pytest.approx(speed(LLAMA, [*EAGLE, *chain(3)]), rel=0.01)
    # the batch-64 tier's only candidate is 0 steps: the same speed as no speculation (its cap
    # lifted)
    assert speed(LLAMA, on, 64) == pytest.approx(
        speed(LLAMA, [*BASE, "--max-running-requests", "64"], 64), rel=0.02)


def test_adaptive_engine_switches_and_logs_like_sglang() -> None:
    profile = load_profile(LLAMA)
    config = resolve(profile, [*EAGLE, "--speculative-adaptive", "--speculative-num-steps", "1"],
                     exit_on_error=False)
    lines: list[str] = []

    async def scenario() -> None:
        engine = Engine(profile, config, seed=3, clock=VirtualClock(), on_log=lines.append)
        engine.start()
        try:
            handle = engine.submit(GenerationRequest("Tell me a story about a lighthouse keeper.",
                                                     200, ignore_eos=True))
            async for _ in handle.chunks():
                pass
        finally:
            await engine.stop()

    asyncio.run(scenario())
    switches = [line for line in lines
                if line.startswith("Adaptive spec params updated: steps 1 -> 3")]
    assert switches, lines  # accepting ~0.86 of 1 draft, the batch-1 slot climbs from 1 step


def test_nextn_runs_the_models_own_head_without_draft_weights() -> None:
    profile = load_profile(MTP)
    config = resolve(profile, [*BASE, "--speculative-algorithm", "NEXTN", *chain(3)],
                     exit_on_error=False)
    eagle = resolve(profile, [*EAGLE, *chain(3)], exit_on_error=False)
    assert config.kind is SpecKind.MTP and eagle.kind is SpecKind.EAGLE
    # the MTP layer is smaller than a draft model
    assert config.memory.weights_gb < eagle.memory.weights_gb
    # calibration (#23336): accept lengths 1.85 / 3.04 / 4.52 at 1 / 3 / 7 steps, within 0.1
    for steps, published in ((1, 1.85), (3, 3.04), (7, 4.52)):
        got = ground_truth.expected_metrics(
            MTP, [*BASE, "--speculative-algorithm", "NEXTN", *chain(steps)], W, 1)
        assert got.accept_length == pytest.approx(published, abs=0.1)
    # ... and 3 steps the fastest of the three, above 1.5x no speculation (published: 1.72x)
    speeds = {s: speed(MTP, [*BASE, "--speculative-algorithm", "NEXTN", *chain(s)], 2)
              for s in (1, 3, 7)}
    assert max(speeds, key=speeds.__getitem__) == 3 and speeds[3] > 1.5 * speed(MTP, BASE, 2)


def test_nextn_without_mtp_layers_fails_to_start() -> None:
    config = resolve(load_profile(LLAMA), [*BASE, "--speculative-algorithm", "NEXTN"],
                     exit_on_error=False)
    assert config.startup_error is not None and "MTP" in config.startup_error.message


def test_ngram_acceptance_follows_the_prompts_repetitiveness() -> None:
    argv = [*BASE, "--speculative-algorithm", "NGRAM"]
    config = resolve(load_profile(LLAMA), argv, exit_on_error=False)
    # no draft model
    assert config.kind is SpecKind.NGRAM and config.memory.weights_gb == pytest.approx(16.1)
    prose = ("The committee met on Tuesday to discuss the budget, the new library wing, parking "
             "downtown, a festival in June, and how volunteers could help neighbours through the "
             "winter months. ") * 2
    repetitive = '{"id": 1, "name": "item", "tags": ["a", "b"], "price": 10},\n' * 12
    plain = ground_truth.expected_metrics(LLAMA, argv, W, 1, prompt_text=prose)
    code = ground_truth.expected_metrics(LLAMA, argv, W, 1, prompt_text=repetitive)
    assert code.accept_length > plain.accept_length + 0.5
    # on the builtin chat prompts NGRAM is worth less than an EAGLE-3 head, and loses at high
    # concurrency
    assert speed(LLAMA, argv) < speed(LLAMA, [*EAGLE, *chain(3)])
    assert speed(LLAMA, argv, 64) < speed(LLAMA, BASE, 64)


def test_standalone_draft_costs_more_per_step_than_eagle() -> None:
    standalone = [*BASE, "--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path",
                  "d", *chain(3)]
    config = resolve(load_profile(LLAMA), standalone, exit_on_error=False)
    assert config.kind is SpecKind.STANDALONE
    assert speed(LLAMA, standalone) < speed(LLAMA, [*EAGLE, *chain(3)])


def test_disable_overlap_schedule_adds_cpu_and_gpu_and_warns() -> None:
    argv = [*EAGLE, *chain(3), "--disable-overlap-schedule"]
    config = resolve(load_profile(LLAMA), argv, exit_on_error=False)
    assert not config.overlap
    assert "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative " \
           "decoding." in (
        config.warnings)
    assert speed(LLAMA, argv) < 0.85 * speed(LLAMA, [*EAGLE, *chain(3)])
