"""The resolver's plumbing without a process: which interpreter a command names, the cache, one
restart after the resolver stops answering; a setup error (no GPU, a missing module, a dead
resolver) is never a verdict."""

from __future__ import annotations

import json
import logging

import pytest

from tuner.targets.base import SGLangRefused
from tuner.targets.resolver import SGLangResolver, interpreter_of_script, server_args_of
from tuner.targets.setup_errors import SGLangCannotJudge, is_verdict


def test_the_interpreter_a_command_names() -> None:
    assert server_args_of(["/opt/v/bin/python3", "-m", "sglang.launch_server", "--tp-size",
                           "4"]) == (
        "/opt/v/bin/python3", ["--tp-size", "4"])
    assert server_args_of(["/opt/v/bin/sglang", "serve", "--tp-size", "4"]) \
           == (None, ["--tp-size", "4"])
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
        self.lines.append(
            json.dumps({"verdict": "refused", "exit_code": 2, "error": "sglang serve: error: bad"}
                       if refused
                       else {"verdict": "accepted", "effective": {"page_size": 64}}))

    def receive(self, timeout_s: float) -> str | None:
        return self.lines.pop(0) if self.lines else None

    def close(self) -> None:
        pass


def test_answers_are_cached_and_a_dead_resolver_is_started_once_more() -> None:
    pipes = [FakePipe("0.5.23", dies_after=1), FakePipe("0.5.23", dies_after=1)]
    resolver = SGLangResolver.start(lambda: pipes.pop(0) if pipes else None, where="gpu-1")
    assert resolver is not None and resolver.version == "0.5.23"
    first = resolver.resolve(["--a"])
    assert first is not None and first.accepted and first.effective == {"page_size": 64}
    assert resolver.resolve(["--a"]) is first  # cached: not asked again
    # The first process dies at its second question: a fresh one answers it.
    with pytest.raises(SGLangRefused,
                       match=r"SGLang 0\.5\.23 on gpu-1 refuses .*exit 2.*error: bad"):
        resolver.check(["--bad"])
    # The second dies too, and no third can be started: SGLang cannot judge, which is no verdict on
    # "--c".
    with pytest.raises(SGLangCannotJudge,
                       match="SGLang on gpu-1 cannot judge configurations: its resolver "
                             "stopped answering") as info:
        resolver.resolve(["--c"])
    assert info.value.exit_code == 3 and not info.value.retryable
    assert resolver.resolve(["--d"]) is None  # gone (and said so once)


def test_where_the_study_allows_it_the_rules_judge_after_one_line(
        caplog: pytest.LogCaptureFixture) -> None:
    pipes = [FakePipe("0.5.23", dies_after=0)]
    resolver = SGLangResolver.start(lambda: pipes.pop(0) if pipes else None, where="gpu-1",
                                    fallback=True)
    assert resolver is not None
    with caplog.at_level(logging.WARNING):
        assert resolver.resolve(["--c"]) is None
        assert resolver.resolve(["--d"]) is None
    assert len(caplog.records) == 1
    assert caplog.records[0].getMessage().startswith(
        "SGLang on gpu-1 cannot judge configurations: its resolver "
        "stopped answering")
    assert caplog.records[0].getMessage().endswith(
        "spectune's own rules judge the configurations instead "
        "([target] when_sglang_cannot_judge = \"rules\")")


def test_no_sglang_there_stops_with_the_fix_or_falls_back_in_one_line(
        caplog: pytest.LogCaptureFixture) -> None:
    def unavailable() -> FakePipe:
        pipe = FakePipe("")
        pipe.lines = [json.dumps({"unavailable": "ModuleNotFoundError: No module named 'sglang'"})]
        return pipe

    with pytest.raises(SGLangCannotJudge,
                       match=r"SGLang is not installed in that Python .* set \[target\] python"):
        SGLangResolver.start(unavailable, where="gpu-1")
    with caplog.at_level(logging.WARNING):
        assert SGLangResolver.start(unavailable, where="gpu-1", fallback=True) is None
    assert len(caplog.records) == 1 and "No module named 'sglang'" in caplog.records[0].getMessage()


class SetupBroken(FakePipe):
    """SGLang imports but every command line fails the same way: a setup error, not a verdict."""

    def __init__(self, error: str, accept_first: bool = False) -> None:
        super().__init__("0.5.23")
        self.error = error
        self.accept_first = accept_first

    def send(self, line: str) -> None:
        self.asked += 1
        if self.accept_first and self.asked == 1:
            self.lines.append(json.dumps({"verdict": "accepted", "effective": {}}))
            return
        self.lines.append(json.dumps({"verdict": "refused", "exit_code": 1, "error": self.error}))


@pytest.mark.parametrize(("error", "cause"), [
    ("RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is "
     "available", "SGLang sees no GPU"),
    ("ModuleNotFoundError: No module named 'sgl_kernel'",
     "a module SGLang imports is missing (sgl_kernel)"),
    ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
     "SGLang's installation does not import"),
    ("RuntimeError: something SGLang never says about a configuration", "the resolver failed"),
])
def test_a_setup_error_is_never_a_verdict(error: str, cause: str) -> None:
    resolver = SGLangResolver.start(lambda: SetupBroken(error), where="gpu-1")
    assert resolver is not None
    with pytest.raises(SGLangCannotJudge) as info:
        resolver.check(["--model-path", "m"])
    assert info.value.cause == cause and "\n" not in str(info.value)


def test_an_unfamiliar_refusal_is_a_verdict_while_sglang_still_accepts_what_it_accepted() -> None:
    resolver = SGLangResolver.start(lambda: SetupBroken("RuntimeError: x", accept_first=True),
                                    where="gpu-1")
    assert resolver is not None
    assert resolver.check(["--ok"]) is not None
    # "--ok" is now refused too when asked again: the installation changed, not the configuration.
    with pytest.raises(SGLangCannotJudge):
        resolver.check(["--other"])
    fine = FakePipe("0.5.23")
    resolver = SGLangResolver.start(lambda: fine, where="gpu-1")
    assert resolver is not None and resolver.check(["--ok"]) is not None
    fine.send = lambda line: fine.lines.append(json.dumps(  # type: ignore[method-assign]
        {"verdict": "accepted", "effective": {}} if "--ok" in line else
        {"verdict": "refused", "exit_code": 1, "error": "RuntimeError: not with this backend"}))
    with pytest.raises(SGLangRefused, match="not with this backend"):
        resolver.check(["--other"])


@pytest.mark.parametrize(("error", "exit_code", "verdict"), [
    ("sglang serve: error: unrecognized arguments: --x", 2, True),
    ("ValueError: trtllm_mha backend only supports topk = 1", 1, True),
    ("AssertionError", 1, True),
    ("NotImplementedError: --speculative-use-rejection-sampling is only supported for EAGLE", 1,
     True),
    ("RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is "
     "available", 1, False),
    ("ValueError: No module named 'flashinfer'", 1, False),
    ("AttributeError: 'NoneType' object has no attribute 'x'", 1, False),
])
def test_which_errors_are_verdicts(error: str, exit_code: int, verdict: bool) -> None:
    assert is_verdict(error, exit_code) is verdict
