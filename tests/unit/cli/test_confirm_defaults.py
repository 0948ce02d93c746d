"""The confirmation defaults ``--help`` shows are the engine's own (one number, one place)."""

from __future__ import annotations

import re

from click.testing import CliRunner

from tuner.cli.confirm import command as confirm_command
from tuner.cli.tune import command as tune_command
from tuner.core.defaults import DEFAULT_REPEATS, DEFAULT_TOP


def _default(help_text: str, option: str) -> int:
    flat = " ".join(help_text.split())
    match = re.search(rf"{option} INTEGER RANGE .*?\[default: (\d+);", flat)
    assert match, flat
    return int(match.group(1))


def test_tune_and_confirm_show_the_engines_defaults() -> None:
    tune_help = CliRunner().invoke(tune_command, ["--help"]).output
    assert _default(tune_help, "--confirm") == DEFAULT_TOP
    assert _default(tune_help, "--repeats") == DEFAULT_REPEATS
    assert _default(CliRunner().invoke(confirm_command, ["--help"]).output,
                    "--repeats") == DEFAULT_REPEATS
