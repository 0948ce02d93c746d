"""systemd quoting: every argv survives the trip through a unit file, and the drop-in passes
systemd-analyze."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import require_binary
from tuner.sglang.launch import LaunchCommand
from tuner.targets.unit_file import (
    environment_line,
    exec_line,
    marker_study,
    quote_word,
    render_dropin,
    split_words,
)

NASTY = ["x; touch /tmp/PWNED $(touch /tmp/PWNED2)", "a\nExecStartPre=/bin/sh -c 'rm -rf /'",
         '"quoted" \\back',
         "%h %n 100%", "$HOME ${PATH} $$", "tab\there", "", "ünï©ødé", "\x01ctrl\x7f"]


@given(st.lists(st.text(), min_size=1, max_size=6))
@settings(max_examples=300, deadline=None)
def test_exec_line_round_trips_any_argv(argv: list[str]) -> None:
    line = exec_line(["/usr/bin/python3", *argv])
    assert "\n" not in line and "\r" not in line
    assert split_words(line) == ["/usr/bin/python3", *argv]


@pytest.mark.parametrize("word", NASTY)
def test_nasty_words_stay_one_word(word: str) -> None:
    quoted = quote_word(word)
    assert quoted.startswith('"') and quoted.endswith('"')
    assert "\n" not in quoted
    assert split_words(quoted) == [word]


def test_specifiers_and_variables_are_doubled() -> None:
    assert quote_word("50%$X") == '"50%%$$X"'
    # Environment= does no $ expansion, so $ stays single there (but % is still a specifier).
    assert environment_line("A", "50%$X") == '"A=50%%$X"'
    assert split_words(environment_line("A", "x y\nz"), command=False) == ["A=x y\nz"]


def test_environment_name_is_checked() -> None:
    with pytest.raises(ValueError, match="environment variable name"):
        environment_line("BAD NAME", "x")


def _dropin(argv: tuple[str, ...], env: tuple[tuple[str, str], ...] = ()) -> str:
    return render_dropin(LaunchCommand(prefix=("/usr/bin/python3", "-m", "sglang.launch_server"),
                                       args=argv, env=env),
                         "my study\n[Service]")


def test_dropin_layout_and_marker() -> None:
    text = _dropin(("--served-model-name", NASTY[0]), (("CUDA_VISIBLE_DEVICES", "0,1"),))
    lines = text.splitlines()
    assert lines.count("[Service]") == 1  # the study name cannot open a section
    service = lines[lines.index("[Service]") + 1:]
    assert service[0] == "ExecStart="
    assert split_words(service[1].removeprefix("ExecStart=")) == [
        "/usr/bin/python3", "-m", "sglang.launch_server", "--served-model-name", NASTY[0]]
    assert service[2] == 'Environment="CUDA_VISIBLE_DEVICES=0,1"'
    assert marker_study(text) == "my study?[Service]"
    assert marker_study("[Service]\nExecStart=/bin/true\n") is None


def test_dropin_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = require_binary("systemd-analyze")
    unit = tmp_path / "sglang-test.service"
    unit.write_text("[Unit]\nDescription=SGLang\n[Service]\nExecStart=/bin/false\n[Install]\n"
                    "WantedBy=multi-user.target\n")
    dropin_dir = tmp_path / "sglang-test.service.d"
    dropin_dir.mkdir()
    (dropin_dir / "50-spectune.conf").write_text(
        _dropin(
            ("--model-path", "/models/q", *[a for w in NASTY for a in ("--served-model-name", w)]),
            (("A", NASTY[1]), ("B", "50%"))))
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                          timeout=60, env={"SYSTEMD_LOG_LEVEL": "debug", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    # the drop-in was read, not silently ignored
    assert "50-spectune.conf" in done.stderr + done.stdout
    # A broken drop-in does fail, so the check above means something.
    (dropin_dir / "50-spectune.conf").write_text(
        '[Service]\nExecStart=\nExecStart="/bin/echo" "unterminated\n')
    bad = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0
