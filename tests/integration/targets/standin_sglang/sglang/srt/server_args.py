"""``prepare_server_args`` as SGLang 0.5.23 shapes it: argparse (exit 2), then
resolve_once/check_server_args."""

from __future__ import annotations

import argparse
import os
import sys
from types import SimpleNamespace
from typing import Any

from sglang.srt.runtime_context import PRESENTED
from tuner.sglang import rules
from tuner.sglang.hardware import Hardware
from tuner.sglang.options import load_option_table
from tuner.sglang.parse import InvalidServerArgs, parse_server_args

#: A broken installation, as users meet them: ``no-accelerator`` — SGLang sees no GPU and says so
#: for every command line; ``no-sgl-kernel`` — a module SGLang imports is missing (the server's
#: --help still works).
BROKEN_ENV = "STANDIN_SGLANG_BROKEN"
if os.environ.get(BROKEN_ENV) == "no-sgl-kernel":
    raise ModuleNotFoundError("No module named 'sgl_kernel'", name="sgl_kernel")

#: Marks that the stand-in ran (the test checks it ran where the resolver runs).
MARKER_ENV = "STANDIN_SGLANG_MARKER"


class ServerArgs(SimpleNamespace):
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        """The parser of the release ``STANDIN_SGLANG_TABLE`` names (default: the stand-in's
        version), from spectune's shipped table of it."""
        import sglang

        built = load_option_table(os.environ.get("STANDIN_SGLANG_TABLE",
                                                 sglang.__version__)).build_parser(
            allow_abbrev=False)
        for action in built._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                parser._add_action(action)

    def resolve_once(self) -> None:
        # The GPU the resolver presented (read from nvidia-smi), else an H100's.
        verdict = rules.judge(vars(self), Hardware("LlamaForCausalLM",
                                                   PRESENTED.get("device_capability", (9, 0))))
        if verdict.violation is not None:
            kind, _, text = verdict.violation.message.partition(": ")
            raise {"AssertionError": AssertionError, "TypeError": TypeError}.get(
                kind, ValueError)(text)
        assert verdict.effective is not None
        for key, value in verdict.effective.items():
            setattr(self, key, value)

    def check_server_args(self) -> None:
        marker = os.environ.get(MARKER_ENV)
        if marker:
            with open(marker, "a", encoding="utf-8") as out:
                # What the resolver's environment showed SGLang: no GPU (it must never touch a
                # running server's).
                out.write(
                    f"resolved CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r} "
                    f"gpu={PRESENTED.get('device_capability')}\n")


def prepare_server_args(argv: list[str]) -> Any:
    if os.environ.get(BROKEN_ENV) == "no-accelerator":
        raise RuntimeError(
            "No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available")
    try:
        return ServerArgs(**parse_server_args(argv, exit_on_error=False))
    except InvalidServerArgs as exc:
        print(f"sglang serve: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
