"""A command's module is imported when that command is asked for: `spectune simulate`, started once
per trial of a simulated study, does not import SSH, the targets or Optuna first; `--help` still
lists every command."""

from __future__ import annotations

import subprocess
import sys

import click
from click.testing import CliRunner

from tuner.cli import COMMANDS, main

_PROBE = """
import sys
from tuner.cli import main
import click
main.get_command(click.Context(main), "simulate")
print(sorted(m for m in ("paramiko", "optuna", "tuner.cli.tune", "tuner.targets.registry")
             if m in sys.modules))
"""


def test_simulate_imports_only_its_own_module() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "[]", out


def test_every_command_resolves_and_help_lists_them_in_order() -> None:
    ctx = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name
    assert main.get_command(ctx, "no-such-command") is None
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines()
              if line.strip()]
    assert listed == list(COMMANDS)


def test_an_unknown_command_is_one_line() -> None:
    result = CliRunner().invoke(main, ["tunee"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "No such command 'tunee'" in result.stderr
