"""The resolver's plumbing without a process: which interpreter a command names, the cache, one restart after
the resolver stops answering, then spectune's rules."""

from __future__ import annotations

import json
import logging

import pytest

from tuner.targets.base import DeployFailed
from tuner.targets.resolver import SGLangResolver, interpreter_of_script, server_args_of


def test_the_interpreter_a_command_names() -> None:
    assert server_args_of(["/opt/v/bin/python3", "-m", "sglang.launch_server", "--tp-size", "4"]) == (
        "/opt/v/bin/python3", ["--tp-size", "4"])
    assert server_args_of(["/opt/v/bin/sglang", "serve", "--tp-size", "4"]) == (None, ["--tp-size", "4"])
    assert server_args_of(["spectune", "simulate", "--"]) == (None, [])
    assert interpreter_of_script("#!/opt/v/bin/python3.11\nimport sys\n") == "/opt/v/bin/python3.11"
    assert interpreter_of_script("#!/usr/bin/env -S python3 -u\n") == "python3"
    assert interpreter_of_script("#!/bin/sh\nexec python3 x\n") is None


class FakePipe:
    """Answers like the resolver script; ``dies_after`` questions, then nothing."""

    def __init__(self, version: str, dies_after: int = 99) -> None:
        self.lines = [json.dumps({"version": version})]
        self.asked = 0
        self.dies_after = dies_after

    def send(self, line: str) -> None:
        self.asked += 1
        if self.asked > self.dies_after:
            raise OSError("broken pipe")
        refused = "--bad" in json.loads(line)
        self.lines.append(json.dumps({"verdict": "refused", "exit_code": 2, "error": "sglang serve: error: bad"}
                                     if refused else {"verdict": "accepted", "effective": {"page_size": 64}}))

    def receive(self, timeout_s: float) -> str | None:
        return self.lines.pop(0) if self.lines else None

    def close(self) -> None:
        pass


def test_answers_are_cached_and_a_dead_resolver_is_started_once_more(caplog: pytest.LogCaptureFixture) -> None:
    pipes = [FakePipe("0.5.23", dies_after=1), FakePipe("0.5.23", dies_after=1)]
    resolver = SGLangResolver.start(lambda: pipes.pop(0) if pipes else None, where="gpu-1")
    assert resolver is not None and resolver.version == "0.5.23"
    first = resolver.resolve(["--a"])
    assert first is not None and first.accepted and first.effective == {"page_size": 64}
    assert resolver.resolve(["--a"]) is first  # cached: not asked again
    # The first process dies at its second question: a fresh one answers it.
    with pytest.raises(DeployFailed, match=r"SGLang 0\.5\.23 on gpu-1 refuses .*exit 2.*error: bad"):
        resolver.check(["--bad"])
    # The second dies too, and no third can be started: spectune's rules judge from now on, said once.
    with caplog.at_level(logging.WARNING):
        assert resolver.resolve(["--c"]) is None
        assert resolver.resolve(["--d"]) is None
    assert [r.getMessage() for r in caplog.records] == [
        "the SGLang resolver on gpu-1 stopped answering; spectune's own rules judge from now on"]


def test_no_sglang_there_is_one_logged_line(caplog: pytest.LogCaptureFixture) -> None:
    pipe = FakePipe("")
    pipe.lines = [json.dumps({"unavailable": "ModuleNotFoundError: No module named 'sglang'"})]
    with caplog.at_level(logging.WARNING):
        assert SGLangResolver.start(lambda: pipe, where="gpu-1") is None
    assert [r.getMessage() for r in caplog.records] == [
        "SGLang cannot be asked on gpu-1 (ModuleNotFoundError: No module named 'sglang'); spectune's own rules "
        "judge the configurations"]
