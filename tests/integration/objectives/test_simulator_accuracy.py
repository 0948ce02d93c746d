"""The load generator against the SGLang simulator at real speed (time scale 1): the two numbers a tuning
decision needs — C=1 per-request decode tok/s and C=64 aggregate tok/s — within 2 % of the simulator's
noiseless ground truth."""

from __future__ import annotations

import subprocess
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import pytest
import tomli_w

from objectives.prompts import SyntheticPrompts
from objectives.runner import run_benchmark
from objectives.spec import BenchmarkSpec, PhaseSpec, WorkloadSpec
from tests.helpers import spectune_command
from tuner.core.net import free_port
from tuner.simulator import ground_truth, text

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

# The seed's deployment with steps=3 (topk 1, draft tokens 4), enough running requests for C=64.
SERVER_ARGS = [
    "--model-path", "Qwen/Qwen3.5-122B-A10B", "--tp-size", "4",
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "Qwen3.5-122B-A10B-EAGLE3",
    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
    "--max-running-requests", "64", "--enable-metrics",
]
# Fixed lengths (ignore_eos) so that the ground truth's expected length is every request's length; unique
# synthetic prompts so that no request is a prefix-cache hit; the realistic temperature.
WORKLOAD = WorkloadSpec(api="chat", dataset="synthetic", input_tokens=256, max_tokens=128, ignore_eos=True,
                        temperature=0.7, seed=0)


def quick_start_profile(tmp_path: Path) -> Path:
    """The seed profile with a near-instant startup: the timing model is untouched, but the test does not wait
    for 75 s of simulated weight loading and graph capture at time scale 1."""
    shipped = resources.files("tuner.simulator").joinpath("profiles", f"{ground_truth.DEFAULT_PROFILE}.toml")
    data = tomllib.loads(shipped.read_text(encoding="utf-8"))
    data["startup"] = {key: 0.01 for key in data["startup"]}
    path = tmp_path / "quick-start.toml"
    path.write_text(tomli_w.dumps(data))
    return path



@contextmanager
def simulator(args: list[str], profile: Path, log_path: Path, timeout_s: float = 60.0) -> Iterator[str]:
    port = free_port()
    command = [*spectune_command(), "simulate", "--profile", str(profile), "--time-scale", "1", "--seed", "0", "--",
               *args, "--host", "127.0.0.1", "--port", str(port)]
    # The log goes to a file: a pipe nobody reads would fill up and stall the server mid-benchmark.
    log_file = log_path.open("w")
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                log = log_path.read_text(errors="replace")
                pytest.fail(f"the simulator exited with {process.returncode}: {log[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health_generate", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the simulator was not ready within {timeout_s:g} s")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log_file.close()


def test_c1_decode_speed_and_c64_throughput_match_the_ground_truth(tmp_path: Path) -> None:
    # The ground truth is the steady state of a closed loop at C, which a timed phase measures (C in flight
    # to the window's end). A phase of n requests measures whole waves, as bench_serving does, and with
    # these fixed lengths reads ~3 % above the steady state (docs/metrics.md, "Measured window").
    phases = (PhaseSpec(1, requests=8, warmup=1), PhaseSpec(64, duration_s=15, warmup=8))
    profile = quick_start_profile(tmp_path)
    with simulator(SERVER_ARGS, profile, tmp_path / "simulator.log") as url:
        result = run_benchmark(url, BenchmarkSpec(workload=WORKLOAD, phases=phases))
    # What the simulator sees of a synthetic chat prompt (they are all alike in length and repetitiveness).
    content = SyntheticPrompts(WORKLOAD.input_tokens, WORKLOAD.seed).prompt(0).messages[0][1]
    prompt_text = text.prompt_of_messages([{"role": "user", "content": content}])
    profile_name = str(profile)

    c1, c64 = result.phase(1), result.phase(64)
    assert c1.failed == 0 and c64.failed == 0, (c1.errors, c64.errors)
    truth1 = ground_truth.expected_metrics(profile_name, SERVER_ARGS, WORKLOAD, 1, prompt_text=prompt_text)
    truth64 = ground_truth.expected_metrics(profile_name, SERVER_ARGS, WORKLOAD, 64, prompt_text=prompt_text)
    assert c1.per_request_tok_s_mean == pytest.approx(truth1.per_request_tok_s, rel=0.02)
    assert c64.aggregate_tok_s == pytest.approx(truth64.aggregate_tok_s, rel=0.02)
    # The windowed accept length from the Prometheus counters agrees with the model's expectation.
    assert c64.accept_length_source == "metrics"
    assert c64.accept_length == pytest.approx(truth64.accept_length, rel=0.05)
