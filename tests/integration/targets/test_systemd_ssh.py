"""systemd over a real sshd: host keys, reconnects, quoting, sudo, leftovers, the user's unit left
alone."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import require_binary
from tests.integration.targets.harness import SshServer, simulate_prefix
from tuner.core.net import free_port
from tuner.sglang.launch import ServerConfig
from tuner.targets.base import TargetUnavailable
from tuner.targets.ssh import Connection, SSHSettings
from tuner.targets.systemd_ssh import SystemdSettings, SystemdSshTarget
from tuner.targets.unit_command import UnitFlagsDropped
from tuner.targets.unit_file import split_words

FLAGS = {"--model-path": "Qwen/Qwen3.5-122B-A10B", "--tp-size": 4, "--mem-fraction-static": 0.86}


def ssh_settings(sshd: SshServer, **overrides: object) -> SSHSettings:
    base: dict[str, object] = dict(host=sshd.host, port=sshd.port, user=sshd.user,
                                   key_file=str(sshd.key_file),
                                   known_hosts=str(sshd.known_hosts), connect_timeout_s=5,
                                   connect_attempts=2)
    return SSHSettings(**{**base, **overrides})  # type: ignore[arg-type]


def make_target(sshd: SshServer, unit: str, port: int, *, study: str = "ssh-tests",
                **ssh: object) -> SystemdSshTarget:
    return SystemdSshTarget(SystemdSettings(
        ssh=ssh_settings(sshd, **ssh), unit=unit, command=tuple(simulate_prefix()),
        server_port=port,
        listen_host="127.0.0.1", systemd_dir=str(sshd.systemd_dir), startup_timeout_s=30,
        status_interval_s=0.5, study=study))


def server_info(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/server_info", timeout=5) as response:
        return json.loads(response.read())


def dropin(sshd: SshServer, unit: str) -> Path:
    return sshd.systemd_dir / f"{unit}.d" / "50-spectune.conf"


# ----- host keys ----------------------------------------------------------------------------------
@pytest.mark.fault("ssh")
def test_unknown_host_key_is_refused_unless_accepted(sshd: SshServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(TargetUnavailable, match=r"is not in .*accept_unknown_host_key"):
        Connection(ssh_settings(sshd, known_hosts=str(empty))).run(["true"])
    conn = Connection(ssh_settings(sshd, known_hosts=str(empty), accept_unknown_host_key=True))
    assert conn.run(["echo", "hello"]).stdout == "hello\n"
    conn.close()
    assert empty.read_text() == ""  # trusting for this run never writes the user's known_hosts


@pytest.mark.fault("ssh")
@pytest.mark.parametrize("accept_unknown", [False, True])
def test_changed_host_key_is_refused(sshd: SshServer, tmp_path: Path, accept_unknown: bool) -> None:
    known = tmp_path / "known_hosts"
    # Same key type with different bytes: a changed key, whatever accept_unknown_host_key says.
    known.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 {_other_ed25519(tmp_path)}\n")
    with pytest.raises(TargetUnavailable, match=r"CHANGED.*man-in-the-middle"):
        Connection(ssh_settings(sshd, known_hosts=str(known),
                                accept_unknown_host_key=accept_unknown)).run(["true"])


def _other_ed25519(tmp_path: Path) -> str:
    subprocess.run([require_binary("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-f",
                    str(tmp_path / "k")],
                   check=True)
    return (tmp_path / "k.pub").read_text().split()[1]


@pytest.mark.fault("ssh")
def test_unreachable_host_fails_fast(sshd: SshServer) -> None:
    started = time.monotonic()
    with pytest.raises(TargetUnavailable, match="cannot reach"):
        Connection(ssh_settings(sshd, port=free_port())).run(["true"])
    assert time.monotonic() - started < 5


# ----- the deploy path ----------------------------------------------------------------------------
@pytest.mark.fault("ssh")
@pytest.mark.usefixtures("simulator")
def test_dropped_connection_is_reopened(sshd: SshServer) -> None:
    port = free_port()
    unit = sshd.add_unit(port)
    target = make_target(sshd, unit, port)
    try:
        target.deploy(ServerConfig.build({**FLAGS, "--served-model-name": "before"}))
        assert sshd.drop_connections() >= 1
        deployment = target.deploy(ServerConfig.build({**FLAGS, "--served-model-name": "after"}))
        assert server_info(deployment.base_url)["served_model_name"] == "after"
        assert target.conn.opened == 2
    finally:
        target.restore()
        target.close()


@pytest.mark.fault("ssh")
@pytest.mark.usefixtures("simulator")
def test_shell_metacharacters_cannot_inject(sshd: SshServer, tmp_path: Path) -> None:
    nasty = (f"x; touch {tmp_path}/PWNED $(touch {tmp_path}/PWNED2) `touch {tmp_path}/PWNED3` "
             f"\"'\\ %h $HOME ${{PATH}}\ntouch {tmp_path}/PWNED4")
    port = free_port()
    unit = sshd.add_unit(port)
    target = make_target(sshd, unit, port)
    try:
        config = ServerConfig.build({**FLAGS, "--served-model-name": nasty},
                                    {"NOTE": f"$(touch {tmp_path}/PWNED5)"})
        deployment = target.deploy(config)
        assert server_info(deployment.base_url)["served_model_name"] == nasty
        lines = dropin(sshd, unit).read_text().splitlines()
        exec_start = [line for line in lines
                      if line.startswith("ExecStart=") and line != "ExecStart="]
        assert split_words(exec_start[0].removeprefix("ExecStart=")) == deployment.launch.argv
        # And as a word of a remote command line (what preflight does with the server command):
        assert target.conn.run(["printf", "%s", nasty]).stdout == nasty
        assert target.conn.run(["printf", "%s", nasty], sudo=True).stdout == nasty
        assert list(tmp_path.glob("PWNED*")) == []
    finally:
        target.restore()
        target.close()


@pytest.mark.usefixtures("simulator")
def test_sudo_login_and_the_users_unit_is_never_edited(sshd: SshServer) -> None:
    port = free_port()
    unit = sshd.add_unit(port)
    sshd.systemctl("restart", unit)
    original = (sshd.systemd_dir / unit).read_bytes()
    target = make_target(sshd, unit, port, sudo=True)
    try:
        target.deploy(ServerConfig.build({**FLAGS, "--served-model-name": "via-sudo"}))
        assert (sshd.systemd_dir / unit).read_bytes() == original
        assert dropin(sshd, unit).exists()
    finally:
        target.restore()
        target.close()
    assert not dropin(sshd, unit).exists()
    assert (sshd.systemd_dir / unit).read_bytes() == original
    calls = [json.loads(line) for line in sshd.sudo_log().splitlines()]
    assert ["-n", "--", "systemctl", "daemon-reload"] in calls
    assert ["-n", "--", "systemctl", "restart", unit] in calls
    assert all(call[:2] == ["-n", "--"] for call in calls)


@pytest.mark.fault("ssh")
@pytest.mark.usefixtures("simulator")
def test_leftover_dropin_is_detected_and_restored(sshd: SshServer) -> None:
    port = free_port()
    unit = sshd.add_unit(port)
    sshd.systemctl("restart", unit)
    interrupted = make_target(sshd, unit, port, study="night-run")
    interrupted.deploy(ServerConfig.build({**FLAGS, "--served-model-name": "tuned"}))
    interrupted.close()  # the tuner died here: no restore
    target = make_target(sshd, unit, port)
    try:
        leftover = target.detect_leftover()
        assert leftover is not None and "night-run" in leftover
        target.restore()
        assert target.detect_leftover() is None
        assert not dropin(sshd, unit).exists()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if server_info(f"http://127.0.0.1:{port}")["served_model_name"] == "original":
                    break
            except OSError:
                time.sleep(0.05)
        assert server_info(f"http://127.0.0.1:{port}")["served_model_name"] == "original"
    finally:
        target.close()


@pytest.mark.fault("ssh")
def test_a_dropin_that_is_not_ours_is_never_overwritten(sshd: SshServer) -> None:
    port = free_port()
    unit = sshd.add_unit(port)
    dropin(sshd, unit).parent.mkdir()
    dropin(sshd, unit).write_text("[Service]\nLimitNOFILE=65536\n")
    target = make_target(sshd, unit, port)
    with pytest.raises(TargetUnavailable, match="not written by spectune"):
        target.deploy(ServerConfig.build(FLAGS))
    target.restore()  # not ours: left alone
    target.close()
    assert dropin(sshd, unit).read_text() == "[Service]\nLimitNOFILE=65536\n"


@pytest.mark.usefixtures("simulator")
def test_a_stopped_unit_stays_stopped_after_restore(sshd: SshServer) -> None:
    port = free_port()
    unit = sshd.add_unit(port)
    target = make_target(sshd, unit, port)
    try:
        # (the unit's --served-model-name is set too: a deploy that would drop it is refused)
        target.deploy(ServerConfig.build({**FLAGS, "--served-model-name": "mine"}))
        target.restore()
        status = json.loads((sshd.state_dir / f"{unit}.status.json").read_text())
        assert status["ActiveState"] == "inactive"
    finally:
        target.close()


@pytest.mark.usefixtures("simulator")
def test_written_units_pass_systemd_analyze_verify(sshd: SshServer, tmp_path: Path) -> None:
    analyze = require_binary("systemd-analyze")
    port = free_port()
    unit = sshd.add_unit(port)
    target = make_target(sshd, unit, port)
    try:
        target.deploy(ServerConfig.build({**FLAGS, "--served-model-name": "100% $HOME \"q\""},
                                         {"A": "b c"}))
        done = subprocess.run([analyze, "verify", str(sshd.systemd_dir / unit)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        target.restore()
        target.close()


@pytest.mark.usefixtures("simulator")
def test_options_of_the_units_command_are_carried_into_the_dropin_when_the_study_says_so(
        sshd: SshServer) -> None:
    """The unit runs --served-model-name original; the study never sets it. With ``unit_flags =
    "carry"`` the preflight reads the unit's command (`systemctl show -p ExecStart`) and every
    deploy keeps it; the server that comes up answers under the operator's name."""
    port = free_port()
    unit = sshd.add_unit(port)
    base = make_target(sshd, unit, port)
    target = SystemdSshTarget(dataclasses.replace(base.settings, unit_flags="carry"))
    base.close()
    try:
        target.preflight(["--model-path", "--tp-size", "--mem-fraction-static"])
        assert target.carried == ("--served-model-name", "original")
        assert any("--served-model-name original" in n for n in target.notes)
        deployment = target.deploy(ServerConfig.build(FLAGS))
        exec_start = next(line for line in dropin(sshd, unit).read_text().splitlines()
                          if line.startswith("ExecStart=") and line != "ExecStart=")
        words = split_words(exec_start.removeprefix("ExecStart="))
        assert words[words.index("--served-model-name") + 1] == "original"
        assert server_info(deployment.base_url)["served_model_name"] == "original"
        # A later `spectune deploy` (a new target, no preflight) while the drop-in is in force keeps
        # them too: the drop-in records what it carries. Without "carry", a deploy that would drop
        # them is refused.
        later = SystemdSshTarget(dataclasses.replace(base.settings, unit_flags="carry"))
        later.deploy(ServerConfig.build(FLAGS))
        assert later.carried == ("--served-model-name", "original")
        later.close()
        strict = make_target(sshd, unit, port)
        with pytest.raises(UnitFlagsDropped, match="would drop: --served-model-name original"):
            target.restore()
            strict.deploy(ServerConfig.build(FLAGS))
        strict.close()
    finally:
        target.restore()
        target.close()
