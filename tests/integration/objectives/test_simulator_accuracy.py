"""The simulator against its ground truth, in two halves that no host load can fail:

* the schedule: the benchmark replayed on the engine with a virtual clock
  (``tuner.simulator.replay``: the load generator's closed loop and ``objectives.metrics`` on the
  scheduled chunk times) gives the two numbers a tuning decision needs — C=1 per-request decode
  tok/s within 2 % and C=64 aggregate tok/s within 5 % of the noiseless ground truth (the steady
  state; a drained phase of equal requests batches its waves' prefills);
* the live path: the real load generator against the simulator process gets every token, the
  Prometheus accept length, and a server that kept its schedule or says by how much it did not.

Wall-clock rates of the live run (what the client saw against the schedule) depend on the host's
free CPU, so they are measured by ``bench/simulator_under_load.py``, not asserted here."""

from __future__ import annotations

import json
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
from tuner.simulator import ground_truth, replay, text
from tuner.simulator.profile import load_profile

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

# The seed's deployment with steps=3 (topk 1, draft tokens 4), enough running requests for C=64.
SERVER_ARGS = [
    "--model-path", "Qwen/Qwen3.5-122B-A10B", "--tp-size", "4",
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
    "Qwen3.5-122B-A10B-EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "4", "--max-running-requests", "64", "--enable-metrics",
]
# Fixed lengths (ignore_eos) so that the ground truth's expected length is every request's length;
# unique synthetic prompts so that no request is a prefix-cache hit; the realistic temperature.
WORKLOAD = WorkloadSpec(api="chat", dataset="synthetic", input_tokens=256, max_tokens=128,
                        ignore_eos=True, temperature=0.7, seed=0)


def quick_start_profile(tmp_path: Path) -> Path:
    """The seed profile with a near-instant startup: the timing model is untouched, but the test
    does not wait for 75 s of simulated weight loading and graph capture at time scale 1."""
    shipped = resources.files("tuner.simulator").joinpath("profiles",
                                                          f"{ground_truth.DEFAULT_PROFILE}.toml")
    data = tomllib.loads(shipped.read_text(encoding="utf-8"))
    data["startup"] = {key: 0.01 for key in data["startup"]}
    path = tmp_path / "quick-start.toml"
    path.write_text(tomli_w.dumps(data))
    return path



@contextmanager
def simulator(args: list[str], profile: Path, log_path: Path, time_scale: float,
              timeout_s: float = 60.0) -> Iterator[str]:
    port = free_port()
    command = [*spectune_command(), "simulate", "--profile", str(profile), "--time-scale",
               str(time_scale),
               "--seed", "0", "--", *args, "--host", "127.0.0.1", "--port", str(port)]
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


def prompt_text(index: int) -> str:
    """What the simulator sees of synthetic chat prompt ``index``."""
    content = SyntheticPrompts(WORKLOAD.input_tokens, WORKLOAD.seed).prompt(index).messages[0][1]
    return text.prompt_of_messages([{"role": "user", "content": content}])


PHASES = (PhaseSpec(1, requests=8, warmup=1), PhaseSpec(64, requests=192, warmup=8))


def test_the_schedule_gives_the_ground_truth_c1_speed_and_c64_throughput(tmp_path: Path) -> None:
    profile = quick_start_profile(tmp_path)
    config = ground_truth.resolve_config(load_profile(str(profile)), SERVER_ARGS)
    c1, c64 = replay.replay(load_profile(str(profile)), config, WORKLOAD, PHASES, prompt_text)
    # The synthetic prompts are all alike in length and repetitiveness: one stands for all.
    truth1 = ground_truth.expected_metrics(str(profile), SERVER_ARGS, WORKLOAD, 1,
                                           prompt_text=prompt_text(0))
    truth64 = ground_truth.expected_metrics(str(profile), SERVER_ARGS, WORKLOAD, 64,
                                            prompt_text=prompt_text(0))
    assert c1.completed == 8 and c64.completed >= 192
    assert c1.per_request_tok_s_mean == pytest.approx(truth1.per_request_tok_s, rel=0.02)
    # The phase drains (first send to last completion, as bench_serving): these 64 equal requests
    # run in waves that start together, so each wave is one batched prefill where the steady-state
    # truth counts one prefill stall per other request — the replay reads 3.5 % above it here (0.7 %
    # above with the old window that ended at the n-th completion and let the next wave's prefill
    # stall the last requests).
    assert c64.aggregate_tok_s == pytest.approx(truth64.aggregate_tok_s, rel=0.05)
    assert c64.aggregate_tok_s >= truth64.aggregate_tok_s  # batched prefills only ever save time


def test_the_live_load_generator_gets_every_token_and_the_accept_length(tmp_path: Path) -> None:
    profile = quick_start_profile(tmp_path)
    scale = 10.0
    with simulator(SERVER_ARGS, profile, tmp_path / "simulator.log", scale) as url:
        result = run_benchmark(url, BenchmarkSpec(workload=WORKLOAD, phases=PHASES))
        with urllib.request.urlopen(f"{url}/get_server_info", timeout=10) as response:
            schedule = json.load(response)["simulator"]
    c1, c64 = result.phase(1), result.phase(64)
    assert c1.failed == 0 and c64.failed == 0, (c1.errors, c64.errors)
    assert c1.completed == 8 and c64.completed >= 192
    # The simulator stamps its events: the figures are on its schedule, not on this host's arrival
    # times.
    assert c1.timebase == c64.timebase == "server" and c64.client_aggregate_tok_s is not None
    finished = [r for r in (*c1.records, *c64.records) if r.ok]
    assert all(r.output_tokens == WORKLOAD.max_tokens for r in finished)
    # The windowed accept length from the Prometheus counters (counts, not times) agrees with the
    # model.
    truth64 = ground_truth.expected_metrics(str(profile), SERVER_ARGS, WORKLOAD, 64,
                                            prompt_text=prompt_text(0))
    assert c64.accept_length_source == "metrics"
    assert c64.accept_length == pytest.approx(truth64.accept_length, rel=0.05)
    # The server accounts for every real second of its schedule: simulated / scale, plus what it
    # gave up.
    assert schedule["time_scale"] == scale
    assert schedule["busy_s"] == pytest.approx(schedule["simulated_s"] / scale
                                               + schedule["dropped_s"], rel=1e-6)
