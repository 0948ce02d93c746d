"""``spectune bench`` as users run it: a subprocess against a server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import spectune_command
from tests.integration.objectives.fake_sglang import Mode, fake_server
from tests.integration.objectives.hostile_server import hostile_server
from tuner.cli.bench import EXIT_FAILED
from tuner.core.net import free_port
from tuner.simulator.process import running_simulator

pytestmark = pytest.mark.timeout(60)

SIMULATOR_ARGS = ["--model-path", "Qwen/Qwen3.5-122B-A10B", "--tp-size", "4",
                  "--speculative-algorithm", "EAGLE3",
                  "--speculative-draft-model-path", "Qwen/Qwen3.5-122B-A10B-EAGLE3",
                  "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                  "--speculative-num-draft-tokens", "4", "--max-running-requests", "8"]


def errors(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error:")]


def spectune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*spectune_command(), "bench", *args], capture_output=True, text=True,
                          timeout=60)


def test_json_output_has_every_phase_and_its_metrics() -> None:
    with fake_server(modes=[Mode.OK, Mode.OK, Mode.HTTP_500]) as server:
        done = spectune(server.url, "--phase", "C=1:n=3:warmup=0", "--phase", "C=3:n=9", "--api",
                        "completions",
                        "--max-tokens", "50", "--temperature", "0.2", "--max-error-rate", "0.5",
                        "--json")
        bodies = server.script.bodies
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [p["phase"] for p in result["phases"]] == ["C=1", "C=3"]
    first = result["phases"][0]
    assert first["completed"] + first["failed"] == 3 and first["errors"] == {"http_5xx": 1}
    assert first["aggregate_tok_s"] > 0 and first["ttft_p99_ms"] > 0
    # the latency figures carry their 95 % intervals (two successful requests and more)
    low, high = result["phases"][1]["ttft_p50_ms_ci"]
    assert low <= result["phases"][1]["ttft_p50_ms"] <= high
    assert result["workload"]["api"] == "completions"
    assert bodies[0]["max_tokens"] == 50 and bodies[0]["temperature"] == 0.2


def test_table_output_and_progress() -> None:
    with fake_server() as server:
        done = spectune(server.url, "--phase", "C=2:n=4", "--dataset", "synthetic",
                        "--input-tokens", "64")
    assert done.returncode == 0, done.stderr
    assert "aggregate output tok/s" in done.stdout and "C=2" in done.stdout
    assert "TTFT p50 / TTFT p99 / ITL mean 95% CI ms" in done.stdout
    assert "C=2" in done.stderr  # the progress bar goes to stderr


def test_usage_errors_are_one_line_with_exit_code_2(tmp_path: Path) -> None:
    bad_phase = spectune("http://127.0.0.1:9", "--phase", "C=2:n=many")
    assert bad_phase.returncode == 2
    assert bad_phase.stderr.strip().splitlines() == [
        "error: phase 'C=2:n=many': n must be a whole number, not 'many'"]
    missing = spectune("http://127.0.0.1:9", "--dataset", str(tmp_path / "nope.jsonl"), "--phase",
                       "C=1:n=1")
    assert missing.returncode == 2 and "cannot read prompt file" in missing.stderr
    assert spectune("127.0.0.1:9").returncode == 2


def test_a_dead_server_fails_fast_with_one_line_and_no_table() -> None:
    # the default phases (199 requests), against a port nothing listens on: refused before any
    # request is sent
    url = f"http://127.0.0.1:{free_port()}"
    for args in ((), ("--json",)):
        done = spectune(url, "--connect-timeout", "2", *args)
        assert done.returncode == EXIT_FAILED == 3, done.stderr
        assert errors(done) == [
            f"error: no server answers at {url} (GET /v1/models: connection refused): nothing "
            "was measured"]
        assert done.stdout == ""  # no table of zeros, no JSON of a benchmark that never ran
        assert "C=64" not in done.stderr  # no phase started (its progress would name it)


def test_an_error_rate_above_the_threshold_is_exit_3() -> None:
    with fake_server(modes=[Mode.OK, Mode.HTTP_500]) as server:
        over = spectune(server.url, "--phase", "C=1:n=6:warmup=0")
        tolerated = spectune(server.url, "--phase", "C=1:n=6:warmup=0", "--max-error-rate", "0.6")
    assert over.returncode == 3, over.stderr
    assert errors(over) == [
        "error: C=1: error rate 50.0% is above --max-error-rate 10.0% (errors: http_5xx 3)"]
    assert "aggregate output tok/s" in over.stdout  # the table is still printed
    assert tolerated.returncode == 0, tolerated.stderr
    assert errors(tolerated) == []


def test_lying_token_counts_fail_the_benchmark_instead_of_a_traceback() -> None:
    with hostile_server() as server:
        done = spectune(server.url("huge_usage_1e30"), "--model", "m", "--phase",
                        "C=2:n=4:warmup=0", "--json")
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert errors(done) == ["error: C=2: no successful request (errors: bad_usage 4)"]
    assert json.loads(done.stdout)["phases"][0]["aggregate_tok_s"] == 0


def test_figures_are_labelled_scaled_when_the_server_says_its_time_scale() -> None:
    with fake_server(time_scale=50.0) as server:
        table = spectune(server.url, "--phase", "C=2:n=4")
        as_json = spectune(server.url, "--phase", "C=2:n=4", "--json")
    assert table.returncode == 0, table.stderr
    assert "SCALED" in table.stdout and "time scale 50: the figures are scaled" in table.stderr
    result = json.loads(as_json.stdout)
    assert result["time_scale"] == 50.0 and result["scaled"] is True


@pytest.mark.timeout(120)
def test_against_the_simulator_success_is_0_and_refused_requests_are_3(tmp_path: Path) -> None:
    with running_simulator(SIMULATOR_ARGS, time_scale=100.0,
                           log_path=tmp_path / "simulator.log", ready_timeout_s=60) as sim:
        ok = spectune(sim.url, "--phase", "C=2:n=4", "--max-tokens", "16", "--json")
        # far past the context window: the simulator refuses every request with HTTP 400, as SGLang
        # does
        refused = spectune(sim.url, "--phase", "C=2:n=4", "--max-tokens", "100000000")
        table = spectune(sim.url, "--phase", "C=1:n=2:warmup=0", "--max-tokens", "16")
    assert ok.returncode == 0, ok.stderr
    assert table.returncode == 0 and "SCALED" in table.stdout, table.stdout
    assert "time scale 100: the figures are scaled" in table.stderr
    result = json.loads(ok.stdout)
    assert result["phases"][0]["completed"] == 4
    # The simulator says its time scale in /server_info's "simulator" section: the figures are
    # labelled.
    assert result["time_scale"] == 100.0 and result["scaled"] is True
    assert refused.returncode == 3, refused.stderr
    assert len(errors(refused)) == 1 \
           and "no successful request (errors: http_4xx" in errors(refused)[0]
