"""``spectune bench`` as users run it: a subprocess against a server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import spectune_command
from tests.integration.objectives.fake_sglang import Mode, fake_server

pytestmark = pytest.mark.timeout(60)


def spectune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*spectune_command(), "bench", *args], capture_output=True, text=True, timeout=60)


def test_json_output_has_every_phase_and_its_metrics() -> None:
    with fake_server(modes=[Mode.OK, Mode.OK, Mode.HTTP_500]) as server:
        done = spectune(server.url, "--phase", "C=1:n=3:warmup=0", "--phase", "C=3:n=9", "--api", "completions",
                        "--max-tokens", "50", "--temperature", "0.2", "--json")
        bodies = server.script.bodies
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [p["phase"] for p in result["phases"]] == ["C=1", "C=3"]
    first = result["phases"][0]
    assert first["completed"] + first["failed"] == 3 and first["errors"] == {"http_5xx": 1}
    assert first["aggregate_tok_s"] > 0 and first["ttft_p99_ms"] > 0
    assert result["workload"]["api"] == "completions"
    assert bodies[0]["max_tokens"] == 50 and bodies[0]["temperature"] == 0.2


def test_table_output_and_progress() -> None:
    with fake_server() as server:
        done = spectune(server.url, "--phase", "C=2:n=4", "--dataset", "synthetic", "--input-tokens", "64")
    assert done.returncode == 0, done.stderr
    assert "aggregate output tok/s" in done.stdout and "C=2" in done.stdout
    assert "C=2" in done.stderr  # the progress bar goes to stderr


def test_usage_errors_are_one_line_with_exit_code_2(tmp_path: Path) -> None:
    bad_phase = spectune("http://127.0.0.1:9", "--phase", "C=2:n=many")
    assert bad_phase.returncode == 2
    assert bad_phase.stderr.strip().splitlines() == ["error: phase 'C=2:n=many': n must be a whole number, not 'many'"]
    missing = spectune("http://127.0.0.1:9", "--dataset", str(tmp_path / "nope.jsonl"), "--phase", "C=1:n=1")
    assert missing.returncode == 2 and "cannot read prompt file" in missing.stderr
    assert spectune("127.0.0.1:9").returncode == 2
