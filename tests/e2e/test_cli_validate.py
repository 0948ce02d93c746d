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
    study.write_text((STUDIES / "simulated.toml").read_text().replace(
        "speculative-num-steps =", "speculative-num = { choices = [8] }\nspeculative-num-steps ="))
    result = run("validate", str(study))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"error: {study}: search.speculative-num: ambiguous SGLang 0.5.23 " \
           "option" in result.stderr
    assert result.stdout == ""


def test_validate_missing_file(tmp_path: Path) -> None:
    result = run("validate", str(tmp_path / "nope.toml"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'nope.toml'}: file not found"


def test_validate_prints_no_password_of_a_postgresql_url(tmp_path: Path) -> None:
    study = tmp_path / "pg.toml"
    # port 1: refused
    url = "postgresql+psycopg://tuner:s3cret-pw@127.0.0.1:1/spectune?password=other-secret"
    study.write_text((STUDIES / "simulated.toml").read_text().replace("n_trials = 12",
                                                                      'n_trials = 12\nstorage = '
                                                                      f'"{url}"'))
    result = run("validate", str(study))
    # The file is valid, and all of it is shown; its database is down, which `tune` would stop at
    # (exit 4): said.
    assert result.returncode == 4, result.stderr
    assert "s3cret" not in result.stdout + result.stderr \
           and "other-secret" not in result.stdout + result.stderr
    assert "tuner:***@127.0.0.1:1/spectune" in result.stdout
    assert "Stored: cannot be read now" in result.stdout and "Search space" in result.stdout
    assert result.stderr.startswith("error: cannot open storage") and result.stderr.count("\n") == 1


def test_deploy_best_on_a_study_never_run_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    study = tmp_path / "s.toml"
    study.write_text((STUDIES / "simulated.toml").read_text())
    result = run("deploy", str(study), "--best")
    assert result.returncode == 2
    assert result.stderr.startswith("error: study 'simulated-demo' has never run") \
           and result.stderr.count("\n") == 1
    assert result.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


@pytest.mark.parametrize("command", [[], ["validate"], ["simulate"], ["bench"]])
def test_help_on_every_command(command: list[str]) -> None:
    result = run(*command, "--help")
    assert result.returncode == 0
    assert "Usage:" in result.stdout


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0 and "spectune, version" in result.stdout


def test_validate_names_the_nearest_shipped_table_and_maps_the_renamed_graph_flag(
        tmp_path: Path) -> None:
    """A release without a table of its own is checked against the nearest older one, and validate
    says so; the example's --cuda-graph-max-bs-decode is written as that release spells it."""
    study = tmp_path / "old.toml"
    text = (STUDIES / "simulated.toml").read_text()
    study.write_text(text.replace("seed = 7", 'seed = 7\nsglang_version = "0.5.11"'))
    result = run("validate", str(study))
    assert result.returncode == 0, result.stderr
    assert "Option table: SGLang 0.5.10 — no option table ships for SGLang 0.5.11: checking " \
           "flags against SGLang " \
           "0.5.10's (the nearest shipped" in " ".join(result.stdout.split())  # rich wraps the line
    assert "--cuda-graph-max-bs " in result.stdout \
           and "--cuda-graph-max-bs-decode" not in result.stdout


def _in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The command through click in this process (a subprocess per case costs seconds on a busy
    machine)."""
    from click.testing import CliRunner

    from tuner.cli import main

    result = CliRunner().invoke(main, list(args))
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def _baseline_tree(tmp_path: Path, steps: int, topk: int, draft: int) -> Path:
    import re

    text = (STUDIES / "simulated.toml").read_text()
    for key, value in (("speculative-num-steps", steps), ("speculative-eagle-topk", topk),
                       ("speculative-num-draft-tokens", draft)):
        text = re.sub(rf"(\[baseline\].*?){key} = \d+", rf"\g<1>{key} = {value}", text, flags=re.S)
    path = tmp_path / f"tree-{steps}-{topk}-{draft}.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("steps", "topk", "draft"), [(2, 2, 6), (3, 2, 8), (2, 2, 3)])
def test_a_valid_baseline_tree_is_deployed_as_written(tmp_path: Path, steps: int, topk: int,
                                                      draft: int) -> None:
    """The draft-token count of [baseline] is what the plan deploys (it was silently 5, 6 and 2
    before)."""
    result = _in_process("validate", str(_baseline_tree(tmp_path, steps, topk, draft)), "--plan")
    assert result.returncode == 0, result.stderr
    command = result.stdout.split("Baseline launch command:", 1)[1]
    assert f"--speculative-num-draft-tokens {draft} " in command
    assert f"--speculative-eagle-topk {topk} " in command \
           and f"--speculative-num-steps {steps} " in command


@pytest.mark.parametrize(("steps", "topk", "draft", "rule"), [
    (2, 2, 8, "verifies at most topk + (steps−1)·topk² + 1 = 7 draft tokens"),
    (3, 1, 5, "with eagle-topk 1 SGLang runs num-steps + 1 = 4 draft tokens"),
])
def test_a_baseline_the_server_cannot_run_as_written_is_an_error_naming_the_rule(
        tmp_path: Path, steps: int, topk: int, draft: int, rule: str) -> None:
    result = _in_process("validate", str(_baseline_tree(tmp_path, steps, topk, draft)))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert f"baseline: speculative-num-draft-tokens = {draft} would be deployed as" in result.stderr
    assert rule in result.stderr and "Traceback" not in result.stderr
