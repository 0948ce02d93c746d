"""Preflight: does the installed server know every option the study can emit?

A study written for SGLang 0.5.23 against a server that runs another version would otherwise fail
trial after trial with "unrecognized arguments" (or, worse, "ambiguous option") — each after a
restart. The server's own ``--help`` answers in seconds, so we read it once before the first trial.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tuner.targets.base import DeployFailed

_OPTION = re.compile(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9_-]*)")


def options_in_help(text: str) -> set[str]:
    """Every ``--option`` mentioned in an argparse help text (usage line and option list)."""
    return {m.group(1).rstrip("-") for m in _OPTION.finditer(text)}


def check_flags(flags: Iterable[str], help_text: str, *, where: str) -> None:
    """Raise ``DeployFailed("invalid-flags")`` naming the options ``help_text`` does not list."""
    known = options_in_help(help_text)
    if not known:
        raise DeployFailed("invalid-flags",
                           f"{where} printed no options for --help; is it an SGLang server?",
                           help_text[-2000:])
    unknown = sorted({f for f in flags if f not in known})
    if unknown:
        raise DeployFailed("invalid-flags",
                           f"the server on {where} does not know {', '.join(unknown)} — is its "
                           f"SGLang version the one the study was written for?", help_text[-2000:])

