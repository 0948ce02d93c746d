"""SGLang 0.5.23's own argument parser, built from the shipped option table: argv → argparse dests.

One parser for the simulator (which must fail like ``sglang serve``) and the search space (which
parses the command line it would deploy, so the verdict is on exactly those arguments).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import cache
from typing import Any, NoReturn

from tuner.core.errors import SpectuneError
from tuner.sglang.options import load_option_table

# SGLang 0.5.23 names its parser so, under `sglang serve` and launch_server alike
PROG = "sglang serve"


class InvalidServerArgs(SpectuneError):
    """A command line SGLang would refuse, for callers that want an exception (the ground truth).

    ``kind`` is ``flags`` (argparse, exit 2), ``config`` (a validation error before weights load),
    ``oom`` (memory at load or CUDA-graph capture) or ``runtime`` (starts, then every request
    fails).
    """

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise InvalidServerArgs("flags", message)


@cache
def _parser(raising: bool) -> argparse.ArgumentParser:
    parser = load_option_table().build_parser(allow_abbrev=True, prog=PROG)
    if raising:
        # Same options, but errors become exceptions instead of exit 2.
        parser.__class__ = _RaisingParser
    return parser


def parse_server_args(argv: Sequence[str], *, exit_on_error: bool = True) -> dict[str, Any]:
    """argparse ``dest`` → value, exactly as SGLang 0.5.23's parser gives them.

    With ``exit_on_error`` (the live server) bad flags print usage and exit 2, as the real server
    does; otherwise they raise ``InvalidServerArgs("flags", …)``.
    """
    return vars(_parser(not exit_on_error).parse_args(list(argv)))
