"""The systemd-ssh target asks the SGLang of the unit's interpreter on the host, over the real sshd
login: one resolver process per study (started again after a dropped connection), no GPU visible to
it, a refused configuration fails before the unit restarts, the installed version is checked, and a
host whose Python cannot import SGLang stops the preflight with one line (exit 3) — or, where the
study allows it, falls back to spectune's rules with one logged line. The stand-in ``sglang``
(standin_sglang/) is put on the remote interpreter's path by a ``python`` wrapper on the test
host."""

from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path

import pytest

from tests.integration.targets.harness import SshServer
from tests.integration.targets.test_systemd_ssh import dropin, ssh_settings
from tuner.core.net import free_port
from tuner.sglang.launch import ServerConfig
from tuner.targets.base import DeployFailed
from tuner.targets.setup_errors import SGLangCannotJudge
from tuner.targets.systemd_ssh import SystemdSettings, SystemdSshTarget

STANDIN = Path(__file__).parent / "standin_sglang"
ROOT = Path(__file__).parents[3]
LLAMA = {"--model-path": "meta-llama/Llama-3.1-8B-Instruct", "--speculative-algorithm": "EAGLE3",
         "--speculative-draft-model-path": "d"}
REFUSED = {**LLAMA, "--attention-backend": "trtllm_mha", "--speculative-num-steps": 3,
           "--speculative-eagle-topk": 4, "--speculative-num-draft-tokens": 8}


def python_wrapper(tmp_path: Path, **env: str) -> Path:
    """A ``python`` on the host that imports the stand-in SGLang (as a venv's python imports the
    real one)."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    exports = {"PYTHONPATH": f"{STANDIN}:{ROOT}", "STANDIN_SGLANG_MARKER": str(tmp_path / "marker"),
               "STANDIN_SGLANG_IMPORTS": str(tmp_path / "imports"), **env}
    lines = [f"export {k}={shlex.quote(v)}" for k, v in exports.items()]
    wrapper = bin_dir / "python"
    wrapper.write_text("#!/bin/sh\n" + "\n".join(lines)
                       + f'\nexec {shlex.quote(sys.executable)} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


#: The options of the harness's unit (a study emitting fewer would be refused: the drop-in would
#: drop them).
UNIT_OPTIONS = ["--model-path", "--tp-size", "--served-model-name"]


def make_target(sshd: SshServer, python: Path, *, interpreter: str | None = None,
                fallback: bool = False) -> tuple[SystemdSshTarget, str]:
    port = free_port()
    unit = sshd.add_unit(port)
    target = SystemdSshTarget(SystemdSettings(
        ssh=ssh_settings(sshd), unit=unit, command=(str(python), "-m", "sglang.launch_server"),
        server_port=port,
        listen_host="127.0.0.1", systemd_dir=str(sshd.systemd_dir), startup_timeout_s=30,
        status_interval_s=0.5,
        study="ssh-resolver-tests", python=interpreter, resolver_fallback=fallback))
    return target, unit


def imports(tmp_path: Path) -> int:
    """How many resolver processes (``python -c``) imported SGLang on the host."""
    path = tmp_path / "imports"
    return sum(line.startswith("imported -c ")
               for line in path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.usefixtures("simulator")
def test_the_hosts_sglang_judges_in_one_process_without_a_gpu(sshd: SshServer,
                                                              tmp_path: Path) -> None:
    target, unit = make_target(sshd, python_wrapper(tmp_path))
    try:
        target.preflight(UNIT_OPTIONS)
        assert target.installed_sglang() == "0.5.23"
        effective = target.resolve(ServerConfig.build(LLAMA))
        assert effective is not None
        # As SGLang 0.5.23 resolves it for a Llama: the auto-chosen (5, 4, 8) tree.
        assert (effective["speculative_num_steps"], effective["speculative_eagle_topk"],
                effective["speculative_num_draft_tokens"]) == (5, 4, 8)
        assert target.resolve(ServerConfig.build({**LLAMA,
                                                  "--page-size": 16}))["page_size"] == 16  # type: ignore[index]
        assert target.resolve(ServerConfig.build(LLAMA)) == effective  # cached
        with pytest.raises(DeployFailed,
                           match=r"SGLang 0\.5\.23 on 127\.0\.0\.1 refuses .*topk = 1") as info:
            target.deploy(ServerConfig.build(REFUSED))
        assert info.value.failure_class == "invalid-flags"
        assert not dropin(sshd, unit).exists()  # refused before anything on the host changed
        assert imports(tmp_path) == 1  # one resolver process for every question
        marks = (tmp_path / "marker").read_text().splitlines()
        assert len(marks) == 2 and set(marks) == {"resolved CUDA_VISIBLE_DEVICES='' gpu=None"}

        assert sshd.drop_connections() >= 1  # the resolver's channel dies with the connection ...
        again = target.resolve(ServerConfig.build({**LLAMA, "--page-size": 32}))
        assert again is not None and again["page_size"] == 32  # ... and it is started once more
        assert imports(tmp_path) == 2

        # the deployed server's record is SGLang's answer
        deployment = target.deploy(ServerConfig.build(LLAMA))
        assert deployment.effective == effective
    finally:
        target.restore()
        target.close()


def test_a_host_without_sglang_stops_at_preflight_or_falls_back_where_allowed(
        sshd: SshServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The unit's command imports the stand-in, but the interpreter asked (``[target] python``) has
    # no SGLang.
    target, _ = make_target(sshd, python_wrapper(tmp_path), interpreter=sys.executable)
    try:
        with pytest.raises(SGLangCannotJudge,
                           match=r"^SGLang on 127\.0\.0\.1 cannot judge configurations: SGLang "
                                 r"is not installed in that Python .*set "
                                 r"\[target\] python"):
            target.preflight(UNIT_OPTIONS)
    finally:
        target.close()
    target, _ = make_target(sshd, python_wrapper(tmp_path), interpreter=sys.executable,
                            fallback=True)
    with caplog.at_level(logging.WARNING, logger="tuner.targets.resolver"):
        target.preflight(UNIT_OPTIONS)
    try:
        assert target.installed_sglang() is None
        assert target.resolve(ServerConfig.build(REFUSED)) is None  # spectune's rules judge instead
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and "(ModuleNotFoundError: No module named 'sglang')" in lines[0]
        assert lines[0].endswith("spectune's own rules judge the configurations instead ([target] "
                                 "when_sglang_cannot_judge = \"rules\")")
    finally:
        target.close()


def test_the_hosts_own_option_table_is_read_over_ssh_or_taken_from_the_cache(
        sshd: SshServer, tmp_path: Path) -> None:
    target, _ = make_target(sshd, python_wrapper(tmp_path, STANDIN_SGLANG_VERSION="0.5.10",
                                                 STANDIN_SGLANG_TABLE="0.5.10"))
    try:
        # another release than the study's table: no refusal here any more
        target.preflight(UNIT_OPTIONS)
        assert target.installed_sglang() == "0.5.10" and target.sglang_build()
        asked: list[tuple[str, str]] = []
        table = target.sglang_table(lambda version, build: asked.append((version, build)) or None)
        assert table is not None and table.version == "0.5.10"
        assert table.by_option("--cuda-graph-max-bs") is not None and table.by_option(
            "--cuda-graph-max-bs-decode") is None
        assert asked == [("0.5.10", target.sglang_build())]
        # A cached table is used as is: nothing is read from the host.
        assert target.sglang_table(lambda version, build: table) is table
    finally:
        target.close()
