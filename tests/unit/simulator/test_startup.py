"""The startup script: SGLang's milestones in order, their durations from the profile, and where it
fails."""

from __future__ import annotations

import asyncio
import time

import pytest

from tuner.simulator.config import ServerConfig, resolve
from tuner.simulator.profile import Profile, load_profile
from tuner.simulator.startup import (
    READY_LINE,
    Log,
    graph_capture_s,
    plan_startup,
    run_startup,
    startup_s,
)

BASE = ["--model-path", "Qwen/Qwen3.5-122B-A10B", "--tp-size", "4", "--speculative-algorithm",
        "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4"]


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_profile()


def configure(profile: Profile, *extra: str, base: list[str] = BASE) -> ServerConfig:
    return resolve(profile, [*base, *extra], exit_on_error=False)


def index_of(lines: list[str], text: str, start: int = 0) -> int:
    return next(i for i, line in enumerate(lines) if i >= start and text in line)


def test_milestones_in_sglang_order(profile: Profile) -> None:
    plan = plan_startup(profile, configure(profile, "--max-running-requests", "64"))
    lines = [s.line for s in plan.steps]
    assert plan.failure is None
    target = index_of(lines, "Load weight begin")
    target_end = index_of(lines, "Load weight end", target)
    draft = index_of(lines, "Load weight begin", target_end)
    draft_end = index_of(lines, "Load weight end", draft)
    kv = index_of(lines, "KV Cache is allocated")
    verify = index_of(lines, "Capture target verify CUDA graph begin")
    draft_graph = index_of(lines, "Capture draft decode CUDA graph begin")
    limits = index_of(lines, "max_total_num_tokens=")
    uvicorn = index_of(lines, "Uvicorn running")
    assert target < target_end < draft < draft_end < kv < verify < draft_graph < limits < uvicorn
    assert "max_running_requests=64" in lines[limits]
    assert f"#tokens: {configure(profile).max_total_num_tokens}" in lines[kv]
    s = profile.startup
    graphs = sum(graph_capture_s(profile,
                                 configure(profile, "--max-running-requests", "64")).values())
    expected = (s.process_start_s + s.load_weights_s + s.load_draft_s + s.kv_alloc_s + graphs
                + s.server_start_s)
    assert plan.total_s == pytest.approx(expected)


def test_warnings_are_logged_first(profile: Profile) -> None:
    plan = plan_startup(profile, configure(profile, "--speculative-num-draft-tokens", "6"))
    lines = [s.line for s in plan.steps]
    assert "adjusted to speculative_num_steps + 1" in lines[0]
    assert "Max running requests is reset to 48" in lines[1]
    assert index_of(lines, "Load weight begin") > 1


def test_validation_error_fails_before_weights(profile: Profile) -> None:
    plan = plan_startup(profile, configure(profile, "--attention-backend", "trtllm_mha",
                                           "--speculative-eagle-topk",
                                           "2", "--speculative-num-draft-tokens", "5"))
    assert plan.failure is not None
    assert plan.failure[-1] == "ValueError: trtllm_mha backend only supports topk = 1 for " \
                               "speculative decoding."
    assert not any("Load weight" in s.line for s in plan.steps)
    bare = plan_startup(profile,
                        configure(profile, base=[*BASE[:6], "--speculative-eagle-topk", "2"]))
    assert bare.failure is not None and bare.failure[-1] == "AssertionError"


def test_graph_oom_fails_during_capture_after_the_weights_loaded(profile: Profile) -> None:
    config = configure(profile, "--mem-fraction-static", "0.99", "--cuda-graph-max-bs-decode",
                       "256")
    assert config.memory.failure_stage == "graph"
    plan = plan_startup(profile, config)
    lines = [s.line for s in plan.steps]
    assert plan.failure is not None
    assert any("Capture cuda graph failed: CUDA out of memory" in line for line in plan.failure)
    assert "Capture target verify CUDA graph begin" in lines[-1]
    assert index_of(lines, "Load weight end") < index_of(lines, "KV Cache is allocated")
    assert plan.failure_delay_s > 0


def test_weights_and_kv_oom_fail_at_their_stage(profile: Profile) -> None:
    weights = plan_startup(profile, configure(profile, "--tp-size", "1"))
    assert weights.failure is not None and "CUDA out of memory" in "\n".join(weights.failure)
    assert [s.line for s in weights.steps][-1].startswith("Load weight begin")
    kv = plan_startup(profile, configure(profile, "--mem-fraction-static", "0.5"))
    assert kv.failure is not None and "Not enough memory" in "\n".join(kv.failure)
    assert not any("KV Cache is allocated" in s.line for s in kv.steps)


def test_graph_capture_grows_with_batch_sizes_and_speculation(profile: Profile) -> None:
    small = sum(graph_capture_s(profile,
                                configure(profile, "--cuda-graph-max-bs-decode", "16")).values())
    large = sum(graph_capture_s(profile,
                                configure(profile, "--cuda-graph-max-bs-decode", "48")).values())
    plain = graph_capture_s(profile,
                            configure(profile, "--cuda-graph-max-bs-decode", "48", base=BASE[:4]))
    deeper = sum(graph_capture_s(profile, configure(
        profile, "--cuda-graph-max-bs-decode", "48", "--speculative-num-steps", "6",
        "--speculative-num-draft-tokens", "7")).values())
    assert small < large < deeper
    assert list(plain) == ["target decode"] and plain["target decode"] < large
    spec = graph_capture_s(profile, configure(profile))
    assert spec["draft decode"] > spec["target verify"] \
           or spec["draft extend"] > spec["target verify"]
    assert graph_capture_s(profile, configure(profile, "--disable-cuda-graph")) == {}


def test_run_startup_plays_the_plan_scaled(profile: Profile) -> None:
    plan = plan_startup(profile, configure(profile))
    lines: list[str] = []
    scale = 400.0
    started = time.monotonic()
    ok = asyncio.run(run_startup(plan, scale, Log(lines.append)))
    elapsed = time.monotonic() - started
    assert ok is True
    # From below only: each step sleeps its scaled delay, so a busy host can make it late, never
    # early.
    assert elapsed >= 0.95 * plan.total_s / scale
    assert len(lines) == len(plan.steps)
    assert lines[1].startswith("[") and "TP0] Init torch distributed begin" in lines[1]
    assert READY_LINE not in "\n".join(lines)  # logged by the server after its warmup request


def test_run_startup_prints_the_failure(profile: Profile) -> None:
    plan = plan_startup(profile, configure(profile, "--mem-fraction-static", "0.99",
                                           "--cuda-graph-max-bs-decode", "256"))
    lines: list[str] = []
    assert asyncio.run(run_startup(plan, 1000.0, Log(lines.append))) is False
    assert "Capture cuda graph failed" in lines[-1]


def test_startup_s_is_the_scripts_length_until_ready_or_until_it_fails(profile: Profile) -> None:
    steps = plan_startup(profile, configure(profile)).steps
    assert startup_s(profile, BASE) == pytest.approx(sum(step.delay_s for step in steps)) and steps
    s = profile.startup  # 122B of weights on one GPU: out of memory half-way through loading them
    assert startup_s(profile, [*BASE[:2], "--tp-size", "1"]) \
           == pytest.approx(s.process_start_s + s.load_weights_s / 2)
    # argparse refuses: the process exits at once
    assert startup_s(profile, [*BASE, "--no-such-flag"]) == 0.0
