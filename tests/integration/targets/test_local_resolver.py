"""The local target asks the SGLang its command's interpreter imports (here a stand-in on
PYTHONPATH) before it deploys: a refused configuration fails in seconds with SGLang's message, the
effective values come back, the installed version is checked against the study's option table."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tuner.app.preflight import PreflightResult, run_preflight
from tuner.core.net import free_port
from tuner.sglang.launch import ServerConfig
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace
from tuner.targets.base import DeployFailed
from tuner.targets.local import LocalSettings, LocalTarget

STANDIN = Path(__file__).parent / "standin_sglang"
STANDIN_TORCH = Path(__file__).parent / "standin_torch"
LLAMA = {"--model-path": "meta-llama/Llama-3.1-8B-Instruct", "--speculative-algorithm": "EAGLE3",
         "--speculative-draft-model-path": "d"}


@pytest.fixture
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalTarget:
    root = Path(__file__).parents[3]
    monkeypatch.setenv("PYTHONPATH",
                       os.pathsep.join([str(STANDIN), str(root), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("STANDIN_SGLANG_MARKER", str(tmp_path / "marker"))
    return LocalTarget(LocalSettings(command=(sys.executable, "-m", "sglang.launch_server"),
                                     log_dir=tmp_path / "logs", port=free_port(), stop_grace_s=5,
                                     startup_timeout_s=60, help_timeout_s=60,
                                     study="resolver-tests"))


def test_refused_configuration_fails_before_any_start_with_sglangs_message(target: LocalTarget,
                                                                            tmp_path: Path) -> None:
    target.preflight(["--model-path"])
    try:
        assert target.installed_sglang() == "0.5.23"
        refused = ServerConfig.build({**LLAMA, "--attention-backend": "trtllm_mha",
                                      "--speculative-num-steps": 3, "--speculative-eagle-topk": 4,
                                      "--speculative-num-draft-tokens": 8})
        with pytest.raises(DeployFailed, match="trtllm_mha backend only supports topk = 1") as info:
            target.deploy(refused)
        assert info.value.failure_class == "invalid-flags"
        # nothing started
        assert not (tmp_path / "logs").exists() or not list((tmp_path / "logs").glob("*.log"))
        # refused in resolve_once, before check_server_args
        assert not (tmp_path / "marker").exists()
    finally:
        target.close()


def test_accepted_configuration_records_sglangs_effective_values(target: LocalTarget) -> None:
    target.preflight(["--model-path"])
    try:
        deployment = target.deploy(ServerConfig.build(LLAMA))
        assert deployment.effective is not None
        # The stand-in resolves as SGLang 0.5.23 does for a Llama: the auto-chosen (5, 4, 8) tree.
        assert (deployment.effective["speculative_num_steps"],
                deployment.effective["speculative_eagle_topk"],
                deployment.effective["speculative_num_draft_tokens"]) == (5, 4, 8)
    finally:
        target.restore()
        target.close()


STUDY = """
[study]
name = "own-table"
sglang_version = "0.5.23"
[target]
kind = "local"
command = {command}
[server.flags]
model-path = "meta-llama/Llama-3.1-8B-Instruct"
speculative-algorithm = "EAGLE3"
speculative-draft-model-path = "d"
[search]
{search}
[benchmark]
phases = [{{ concurrency = 1, requests = 2 }}]
"""


def own_table_preflight(tmp_path: Path, target: LocalTarget, search: str) -> PreflightResult:
    path = tmp_path / "own-table.toml"
    path.write_text(STUDY.format(command=json.dumps(list(target.settings.command)), search=search))
    spec = load_study_file(path)
    said: list[str] = []
    result = run_preflight(target, spec, SearchSpace(spec, spec.option_table), said.append)
    assert all(line in result.lines for line in said)
    return result


def test_the_targets_own_option_table_checks_the_study(target: LocalTarget, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """An SGLang 0.5.10 on the target: its own table (read through the resolver) checks the study.
    It spells --cuda-graph-max-bs-decode as --cuda-graph-max-bs (the command is written so); it has
    no --speculative-adaptive (the study stops at preflight naming it); a study it accepts runs, and
    one line says the target runs another release than the study names."""
    monkeypatch.setenv("STANDIN_SGLANG_VERSION", "0.5.10")
    monkeypatch.setenv("STANDIN_SGLANG_TABLE", "0.5.10")
    try:
        # The renamed CUDA-graph flag keeps the study's name and is written as 0.5.10 spells it.
        own_table_preflight(tmp_path, target, "cuda-graph-max-bs-decode = { choices = [32, 64] }")
        launch = target.launch(ServerConfig.build({**LLAMA, "--cuda-graph-max-bs-decode": 32}))
        assert "--cuda-graph-max-bs" in launch.args \
               and "--cuda-graph-max-bs-decode" not in launch.args
        # A flag the release does not have at all: named, with the releases that have it.
        with pytest.raises(DeployFailed, match=r"cannot run on the target's SGLang 0\.5\.10: .*"
                                               r"--speculative-adaptive"):
            own_table_preflight(tmp_path, target,
                                "speculative-adaptive = { choices = [true, false] }")
        result = own_table_preflight(tmp_path, target,
                                     "speculative-num-steps = { min = 1, max = 3 }\n"
                                     "speculative-eagle-topk = { choices = [1] }\n"
                                     "speculative-num-draft-tokens = { min = 2, max = 4 }")
        assert result.installed == "0.5.10" and result.table is not None \
               and result.table.version == "0.5.10"
        # launch commands are rendered with the target's table
        assert target.table.version == "0.5.10"
        assert any("the target runs SGLang 0.5.10" in line for line in result.lines)
        # Its adaptive steps cannot be compared with (0.5.10 has no --speculative-adaptive): said,
        # not a stop.
        assert any("has no --speculative-adaptive" in line for line in result.lines)
    finally:
        target.close()


def test_the_gpu_comes_from_nvidia_smi_and_no_device_is_visible(
        target: LocalTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What SGLang's checks read about the GPU comes from nvidia-smi (no CUDA context); torch sees
    no device."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA B200, 10.0, 183359'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH",
                       os.pathsep.join([str(STANDIN_TORCH), os.environ["PYTHONPATH"]]))
    target.preflight(["--model-path"])
    try:
        assert target._resolver is not None and target._resolver.gpu == "NVIDIA B200"
        effective = target.resolve(
            ServerConfig.build({"--model-path": "meta-llama/Llama-3.1-8B-Instruct"}))
        # A Blackwell's defaults, not the H100's fa3 with 1-token pages:
        assert effective is not None \
               and (effective["attention_backend"], effective["page_size"]) == ("trtllm_mha", 64)
        assert (tmp_path / "marker").read_text() == "resolved CUDA_VISIBLE_DEVICES='' gpu=(10, 0)\n"
    finally:
        target.close()
