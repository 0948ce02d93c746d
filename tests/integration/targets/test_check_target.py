"""``spectune validate --check-target`` on a systemd-ssh study written by ``spectune init``, against
the real sshd fixture: it logs in, asks systemd, and refuses a drop-in spectune did not write —
changing nothing."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from tests.integration.targets.harness import SshServer
from tests.integration.targets.test_ssh_resolver import python_wrapper
from tuner.cli import main
from tuner.core.net import free_port
from tuner.targets.unit_file import DROPIN_NAME


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def study_for(sshd: SshServer, tmp_path: Path) -> tuple[Path, str]:
    """What a user does after `spectune init`: replace the placeholders with their host."""
    path = tmp_path / "gpu.toml"
    made = cli("init", "--target", "systemd-ssh", "--model", "Qwen/Qwen3-8B", "--draft", "d/E3",
               "-o", str(path))
    assert made.exit_code == 0, made.stderr
    unit = sshd.add_unit(free_port())
    text = path.read_text()
    for placeholder, mine in ((
            'host = "gpu-host.example"', f'host = "{sshd.host}"'),
                              ('user = "root"', f'user = "{sshd.user}"'),
            ("# ssh_port = 22", f"ssh_port = {sshd.port}"),
                              ('unit = "sglang.service"', f'unit = "{unit}"'),
            ('# key_file = "~/.ssh/id_ed25519"', f'key_file = "{sshd.key_file}"'),
            ('# known_hosts = "~/.ssh/known_hosts"', f'known_hosts = "{sshd.known_hosts}"'),
            ('# systemd_dir = "/etc/systemd/system"', f'systemd_dir = "{sshd.systemd_dir}"')):
        assert placeholder in text, placeholder
        text = text.replace(placeholder, mine)
    path.write_text(text)
    return path, unit


def test_check_target_logs_in_and_asks_systemd(sshd: SshServer, tmp_path: Path) -> None:
    path, unit = study_for(sshd, tmp_path)
    # The preflight tune runs is part of the check: the starter's /opt/sglang/.venv/bin/python is
    # not on this host.
    result = cli("validate", "--check-target", str(path))
    assert result.exit_code == 3 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        "error: `/opt/sglang/.venv/bin/python -m sglang.launch_server --help` on ")
    # With the interpreter the host has (its SGLang a stand-in), every step passes and SGLang is
    # asked.
    python = python_wrapper(tmp_path)
    path.write_text(path.read_text().replace('"/opt/sglang/.venv/bin/python"', f'"{python}"'))
    # The unit runs with options the study never sets: the drop-in (it replaces ExecStart) would
    # drop them, so the preflight reads the unit's command and refuses, naming them, before anything
    # is written ...
    result = cli("validate", "--check-target", str(path))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "would drop: --served-model-name original." in result.stderr \
           and 'unit_flags = "carry"' in result.stderr
    assert not (sshd.systemd_dir / f"{unit}.d").exists()
    # ... or, as the study file says, carries them into every deploy.
    path.write_text(path.read_text().replace(f'unit = "{unit}"',
                                             f'unit = "{unit}"\nunit_flags = "carry"'))
    result = cli("validate", "--check-target", str(path))
    assert result.exit_code == 0, result.stderr
    assert "carried into every deploy from the unit's command" in result.output
    assert "--served-model-name original" in result.output
    assert f"SSH login {sshd.user}@{sshd.host}:{sshd.port}: ok" in result.output
    assert f"\n  {unit}: " in result.output
    assert f"no drop-in at {sshd.systemd_dir}/{unit}.d/{DROPIN_NAME} yet" in result.output
    assert "preflight: the target runs SGLang 0.5.23; it judges every " \
           "configuration" in result.output
    assert "distinct servers" in result.output
    assert not (sshd.systemd_dir / f"{unit}.d").exists()  # nothing written


def test_check_target_refuses_a_drop_in_spectune_did_not_write(sshd: SshServer,
                                                               tmp_path: Path) -> None:
    path, unit = study_for(sshd, tmp_path)
    foreign = sshd.systemd_dir / f"{unit}.d" / DROPIN_NAME
    foreign.parent.mkdir()
    foreign.write_text("[Service]\nEnvironment=MINE=1\n")
    result = cli("validate", "--check-target", str(path))
    assert result.exit_code == 3
    assert result.stderr.startswith(
        f"error: {foreign} on {sshd.host} exists and was not written by spectune")
    assert result.stderr.count("\n") == 1
    assert foreign.read_text() == "[Service]\nEnvironment=MINE=1\n"


def test_init_from_unit_writes_the_units_command_as_a_study_that_drops_nothing(
        sshd: SshServer, tmp_path: Path) -> None:
    """`spectune init --from-unit HOST UNIT` reads the running unit's command over SSH: its server
    command, --host/--port and every option land in the study, so the preflight finds nothing the
    drop-in would drop."""
    import tomllib

    port = free_port()
    unit = sshd.add_unit(port, served_name="ops-name")
    path = tmp_path / "from-unit.toml"
    made = cli("init", "--from-unit", f"{sshd.user}@{sshd.host}", unit, "--ssh-port",
               str(sshd.port),
               "--key-file", str(sshd.key_file), "--known-hosts", str(sshd.known_hosts), "-o",
               str(path))
    assert made.exit_code == 0, made.stderr
    study = tomllib.loads(path.read_text())
    target, flags = study["target"], study["server"]["flags"]
    assert (target["kind"], target["host"], target["unit"],
            target["server_port"]) == ("systemd-ssh", sshd.host,
                                      unit, port)
    assert target["listen_host"] == "127.0.0.1" and target["command"][-1] == "--"
    assert flags["served-model-name"] == "ops-name" and flags["tp-size"] == 4
    assert flags["model-path"] == "Qwen/Qwen3.5-122B-A10B"
    # the unit leaves the tree to SGLang: said so
    assert "sets none of the tuned flags" in path.read_text()
    bad = cli("init", "--from-unit", f"{sshd.user}@{sshd.host}", "missing.service", "--ssh-port",
              str(sshd.port),
              "--key-file", str(sshd.key_file), "--known-hosts", str(sshd.known_hosts), "-o",
              str(tmp_path / "x.toml"))
    assert bad.exit_code == 2 and bad.stderr.startswith("error: --from-unit: missing.service on ")
    assert not (tmp_path / "x.toml").exists()


def test_best_prints_the_command_with_the_units_carried_options(tmp_path: Path) -> None:
    """What `best`, the report and summary.md print for a systemd study that carries the unit's
    options is the command its deploys ran: with them (stored by the preflight), not without."""
    from tuner.query.export import launch_for
    from tuner.query.stored import original_config
    from tuner.study.load import load_study_file

    path = tmp_path / "gpu.toml"
    made = cli("init", "--target", "systemd-ssh", "--model", "Qwen/Qwen3-8B", "--draft", "d/E3",
               "-o", str(path))
    assert made.exit_code == 0, made.stderr
    spec = load_study_file(path)
    config = original_config(spec)
    plain = launch_for(spec, config).argv
    carried = launch_for(spec, config, ("--api-key", "s3cret", "--served-model-name", "ops")).argv
    assert "--api-key" not in plain
    assert carried[carried.index("--api-key") + 1] == "s3cret" and "--served-model-name" in carried
