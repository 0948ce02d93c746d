"""The real command line: the console script, its exit codes and messages."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import STUDIES, spectune_command


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*spectune_command(), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", ["simulated.toml", "qwen3.5-122b-eagle3.toml"])
def test_validate_accepts_example_studies(name: str) -> None:
    result = run("validate", str(STUDIES / name))
    assert result.returncode == 0, result.stderr
    assert "Search space" in result.stdout
    assert "distinct valid configurations" in result.stdout
    assert "--speculative-num-steps" in result.stdout
    assert "sglang.launch_server" in result.stdout or "simulate" in result.stdout


def test_validate_rejects_broken_file_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    study = tmp_path / "broken.toml"
    study.write_text((STUDIES / "simulated.toml").read_text().replace("speculative-num-steps =",
                                                                       "cuda-graph-max-bs = { choices = [8] }\n"
                                                                       "speculative-num-steps ="))
    result = run("validate", str(study))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"error: {study}: search.cuda-graph-max-bs: ambiguous SGLang 0.5.23 option" in result.stderr
    assert result.stdout == ""


def test_validate_missing_file(tmp_path: Path) -> None:
    result = run("validate", str(tmp_path / "nope.toml"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'nope.toml'}: file not found"


@pytest.mark.parametrize("command", [[], ["validate"], ["simulate"], ["bench"]])
def test_help_on_every_command(command: list[str]) -> None:
    result = run(*command, "--help")
    assert result.returncode == 0
    assert "Usage:" in result.stdout


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0 and "spectune, version" in result.stdout
