"""The local target's own promises: a busy port fails fast, a server left by an interrupted run is
found."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from tests.integration.targets.harness import simulate_prefix
from tuner.core.net import free_port
from tuner.sglang.launch import ServerConfig
from tuner.targets.base import TargetUnavailable
from tuner.targets.local import LocalSettings, LocalTarget

pytestmark = pytest.mark.usefixtures("simulator")


FLAGS = {"--model-path": "Qwen/Qwen3.5-122B-A10B", "--tp-size": 4}


def make(tmp_path: Path, port: int, study: str = "local-tests") -> LocalTarget:
    return LocalTarget(LocalSettings(command=tuple(simulate_prefix()), log_dir=tmp_path / "logs",
                                     port=port, stop_grace_s=5, startup_timeout_s=30, study=study))


def test_busy_port_fails_fast_with_a_clear_message(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        target = make(tmp_path, busy.getsockname()[1])
        started = time.monotonic()
        with pytest.raises(TargetUnavailable, match="already in use"):
            target.deploy(ServerConfig.build(FLAGS))
        # far below the 30 s start-up timeout (with room for a busy machine)
        assert time.monotonic() - started < 10


def test_a_server_command_that_fails_its_help_is_one_telling_line(tmp_path: Path) -> None:
    """An SGLang that cannot import prints a traceback: the error is its telling line, one line
    however much it printed (it was the whole output, one `error:` line per line)."""
    script = ("import sys; print('Traceback (most recent call last):\\n  File x\\n'"
              " + 'noise\\n' * 20 + \"ModuleNotFoundError: No module named 'sglang'\\n"
              "(a last remark)\", file=sys.stderr); sys.exit(1)")
    target = LocalTarget(LocalSettings(command=(sys.executable, "-c", script),
                                       log_dir=tmp_path / "logs", port=free_port(),
                                       study="local-tests"))
    with pytest.raises(TargetUnavailable) as info:
        target.preflight(["--model-path"])
    message = str(info.value)
    assert "\n" not in message
    assert message.endswith("exited 1: ModuleNotFoundError: No module named 'sglang'"), message


def test_one_log_file_per_deploy_and_a_leftover_server_is_stopped(tmp_path: Path) -> None:
    port = free_port()
    first = make(tmp_path, port)
    d1 = first.deploy(ServerConfig.build({**FLAGS, "--served-model-name": "a"}))
    d2 = first.deploy(ServerConfig.build({**FLAGS, "--served-model-name": "b"}))
    assert d1.log_location != d2.log_location
    assert "fired up and ready to roll" in Path(d2.log_location).read_text()
    assert first._proc is not None
    pid = first._proc.pid
    # The tuner "dies" here: a new target for the same study finds the server and stops it.
    second = make(tmp_path, port)
    assert f"pid {pid}" in (second.detect_leftover() or "")
    # not that study's server
    assert make(tmp_path, port, study="another-study").detect_leftover() is None
    second.restore()
    assert second.detect_leftover() is None
    # Gone, or a zombie only because this test process is its parent (the dead tuner's would be
    # init).
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
