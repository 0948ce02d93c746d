"""``spectune simulate`` fails the way SGLang 0.5.23 does: argparse (exit 2), validation, OOM,
runtime errors."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import spectune_command
from tests.integration.simulator.conftest import SPEC
from tuner.simulator.process import running_simulator
from tuner.targets.classify import ExitInfo, classify


def simulate(*server_args: str, scale: float = 1000.0,
             timeout: float = 30) -> subprocess.CompletedProcess[str]:
    command = [*spectune_command(), "simulate", "--time-scale", str(scale), "--", *server_args,
               "--host", "127.0.0.1", "--port", "0"]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def test_help_prints_sglang_options() -> None:
    done = subprocess.run([*spectune_command(), "simulate", "--", "--help"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0
    assert "usage: sglang serve" in done.stdout and "--speculative-num-steps" in done.stdout


def test_unknown_flag_exits_2() -> None:
    done = simulate(*SPEC, "--no-such-flag", "1")
    assert done.returncode == 2
    assert "sglang serve: error: unrecognized arguments: --no-such-flag 1" in done.stderr
    assert classify(done.stderr, ExitInfo(code=2)).failure_class == "invalid-flags"


def test_ambiguous_prefix_exits_2() -> None:
    done = simulate(*SPEC, "--cuda-graph-max-bs", "64")
    assert done.returncode == 2
    assert ("ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
            "--cuda-graph-max-bs-prefill") in done.stderr


def test_validation_error_exits_before_loading_weights() -> None:
    done = simulate(*SPEC, "--attention-backend", "trtllm_mha", "--speculative-eagle-topk", "2",
                    "--speculative-num-draft-tokens", "5")
    assert done.returncode == 1
    assert "ValueError: trtllm_mha backend only supports topk = 1 for speculative " \
           "decoding." in done.stderr
    assert "Load weight begin" not in done.stderr
    assert classify(done.stderr, ExitInfo(code=1)).failure_class == "invalid-flags"


def test_partial_tree_flags_fail_with_a_bare_assertion() -> None:
    done = simulate("--model-path", "Qwen/Qwen3.5-122B-A10B", "--tp-size", "4",
                    "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "2")
    assert done.returncode == 1 and done.stderr.rstrip().endswith("AssertionError")


def test_graph_capture_out_of_memory() -> None:
    done = simulate(*SPEC, "--mem-fraction-static", "0.99", "--cuda-graph-max-bs-decode", "256")
    assert done.returncode != 0
    log = done.stderr
    assert "Capture cuda graph failed: CUDA out of memory" in log
    assert log.index("Load weight end") < log.index("KV Cache is allocated") < log.index(
        "Capture cuda graph failed")
    assert "fired up" not in log
    assert classify(log, ExitInfo(code=done.returncode)).failure_class == "out-of-memory"


def test_over_large_tree_starts_then_every_request_fails(tmp_path: Path) -> None:
    args = [*SPEC[:-4], "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "16"]
    with running_simulator(args, time_scale=400.0, log_path=tmp_path / "log") as sim:
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20,
                           "stream": True})
        request = urllib.request.Request(f"{sim.url}/v1/chat/completions", data=body.encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
            raw = response.read().decode()
        errors = [json.loads(b[6:]) for b in raw.split("\n\n") if b.startswith("data: {\"error\"")]
        assert errors and "selected index k out of range" in errors[0]["error"]["message"]
        assert raw.rstrip().endswith("data: [DONE]")
        whole = urllib.request.Request(f"{sim.url}/v1/completions",
                                       data=b'{"prompt": "x", "max_tokens": 5}',
                                       headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(whole, timeout=10)
        assert info.value.code == 500 and "selected index" in info.value.read().decode()


def test_missing_profile_and_bad_time_scale_are_cli_errors() -> None:
    done = subprocess.run(
        [*spectune_command(), "simulate", "--profile", "no-such-profile", "--", *SPEC],
        capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "no simulator profile 'no-such-profile'" in done.stderr
    done = subprocess.run([*spectune_command(), "simulate", "--time-scale", "0", "--", *SPEC],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "--time-scale" in done.stderr
