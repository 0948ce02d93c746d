"""``spectune deploy``: a stored trial's configuration, the original one, and clear errors."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import optuna
import pytest

from tests.helpers import spectune_command
from tests.integration.targets.harness import simulate_prefix
from tuner.core.net import free_port
from tuner.sglang.launch import ServerConfig
from tuner.study.load import load_study_file

pytestmark = pytest.mark.usefixtures("simulator")


STUDY = """
[study]
name = "deploy-test"
n_trials = 2

[target]
kind = "local"
command = {command}
port = {port}
startup_timeout = "30s"
log_dir = "logs"

[server.flags]
model-path = "Qwen/Qwen3.5-122B-A10B"
tp-size = 4
served-model-name = "original"

[search]
mem-fraction-static = {{ min = 0.80, max = 0.90, step = 0.02 }}

[benchmark]
api = "chat"
dataset = "builtin"
max_tokens = 16
phases = [{{ concurrency = 1, requests = 2, warmup = 0 }}]
"""


@pytest.fixture()
def study_file(tmp_path: Path) -> tuple[Path, int]:
    port = free_port()
    path = tmp_path / "study.toml"
    path.write_text(STUDY.format(command=json.dumps(simulate_prefix()), port=port))
    return path, port


def served_name(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as response:
        return str(json.loads(response.read())["served_model_name"])


def deploy_in_background(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*spectune_command(), "deploy", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def wait_for_serving(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen += line
        if "serving;" in line or not line:
            return seen
    return seen


def test_deploy_a_stored_trial_then_stop_with_sigterm(study_file: tuple[Path, int]) -> None:
    path, port = study_file
    spec = load_study_file(path)
    study = optuna.create_study(study_name=spec.study.name, storage=spec.study.storage)
    trial = study.ask()
    config = ServerConfig.build({**spec.server_flags, "--served-model-name": "trial-zero"})
    trial.set_user_attr("config", config.to_json())
    study.tell(trial, 1.0)

    proc = deploy_in_background(str(path), "--trial", "0")
    try:
        output = wait_for_serving(proc)
        assert "ready at http://127.0.0.1:" in output, output
        assert served_name(port) == "trial-zero"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 143  # 128 + SIGTERM, as tune
    finally:
        proc.kill()
    with pytest.raises(OSError):
        served_name(port)  # the server stopped with the command


def test_deploy_original_for_a_local_target(study_file: tuple[Path, int]) -> None:
    path, port = study_file
    proc = deploy_in_background(str(path), "--original")
    try:
        wait_for_serving(proc)
        assert served_name(port) == "original"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 130  # Ctrl-C: 128 + SIGINT
    finally:
        proc.kill()


def test_missing_study_and_bad_options_are_clear_errors(study_file: tuple[Path, int]) -> None:
    path, _ = study_file
    done = subprocess.run([*spectune_command(), "deploy", str(path), "--best"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("error: study 'deploy-test' has never run") \
           and done.stderr.count("\n") == 1
    assert not path.with_suffix(".db").exists()  # reading never creates the database
    spec = load_study_file(path)
    optuna.create_study(study_name=spec.study.name, storage=spec.study.storage)
    done = subprocess.run([*spectune_command(), "deploy", str(path), "--trial", "5"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr == "error: study 'deploy-test' has no trial 5\n"
    done = subprocess.run([*spectune_command(), "deploy", str(path), "--best", "--original"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "exactly one of" in done.stderr
