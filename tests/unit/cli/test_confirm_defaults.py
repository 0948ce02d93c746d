"""The confirmation defaults ``--help`` shows are the engine's own (one number, one place), and
``--trials`` is read strictly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import STUDIES
from tuner.app.confirm import parse_trials
from tuner.cli import main
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


@pytest.mark.parametrize("text", ["1,,2", "1,", ",1", "", " ", "a", "-1", "1.5", "3,3", "1,2,1"])
def test_a_malformed_trial_list_is_refused_before_anything_runs(tmp_path: Path,
                                                                  text: str) -> None:
    """``spectune confirm STUDY --trials …``: exit 2 with one line naming the option, before the
    study is opened or the target touched."""
    study = tmp_path / "demo.toml"
    study.write_text((STUDIES / "simulated.toml").read_text())
    result = CliRunner().invoke(main, ["confirm", str(study), "--trials", text])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: --trials: ") and result.output.count("\n") == 1
    assert not (tmp_path / "demo.db").exists()


def test_a_trial_list_reads_in_order() -> None:
    assert parse_trials("7, 3") == (7, 3) and parse_trials(None) is None
