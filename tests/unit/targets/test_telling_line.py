"""One line out of a failed command's output: the last one that says what went wrong."""

from __future__ import annotations

from tuner.targets.classify import telling_line


def test_the_last_telling_line_wins_over_an_earlier_warning() -> None:
    text = ("UserWarning: ErrorHandler is deprecated\nloading…\n"
            "sudo: /opt/sglang/bin/python: Permission denied\n\n")
    assert telling_line(text) == "sudo: /opt/sglang/bin/python: Permission denied"


def test_a_traceback_gives_its_exception_and_plain_output_its_last_line() -> None:
    traceback = ("Traceback (most recent call last):\n  File \"x\", line 1\n"
                 "ModuleNotFoundError: No module named 'sglang'\n")
    assert telling_line(traceback) == "ModuleNotFoundError: No module named 'sglang'"
    assert telling_line("usage: x\n  --help  show this\n") == "--help  show this"
    assert telling_line("  \n") == ""
    assert len(telling_line("E" * 1000 + " error")) == 300
