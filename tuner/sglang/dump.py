"""Dump SGLang's own argument parser as an option table (the JSON format of tuner/sglang/data).

Stand-alone on purpose: it imports nothing from spectune, only the standard library (and SGLang,
inside ``dump_sglang``), because it runs under SGLang's interpreter — the table generator
(bench/sglang_versions/tables.py) loads this file by path under each release's Python, and the
resolver sends its text (``source()``) to the target's Python. One code path, so a table read from a
target at preflight and a shipped table of the same release are byte-for-byte the same JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from typing import Any

#: What the ``source`` key of a table says.
SOURCE = "argparse table of sglang.srt.server_args.ServerArgs.add_cli_args (help texts omitted)"


def _type_name(action: argparse.Action) -> str:
    kind = action.type
    if kind is None:
        return "None"
    return str(getattr(kind, "__name__", type(kind).__name__))


def dump_parser(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    """One row per option of ``parser`` (the help action left out): option strings, dest, converter
    name, ``repr`` of the default, choices as strings, nargs (0 for switches); ``required`` when
    true, and ``deprecated`` / ``replaced_by`` for SGLang's deprecated spellings."""
    rows = []
    for action in parser._actions:  # argparse has no public iterator over its actions
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        nargs = action.nargs
        if nargs is None and isinstance(action,
                                        (argparse._StoreConstAction, argparse._CountAction)):
            nargs = 0  # store_const (and store_true/false, its subclasses) take no value
        row: dict[str, Any] = {
            "opts": list(action.option_strings),
            "dest": action.dest,
            "type": _type_name(action),
            "default": repr(action.default),
            "choices": _choices(action.choices),
            "nargs": nargs,
        }
        if action.required:
            row["required"] = True
        # SGLang's deprecated spellings (DeprecatedAliasStoreAction and kin) name their successor:
        # spectune maps a renamed option across releases from these, never from a hand-typed list.
        if "Deprecated" in type(action).__name__:
            row["deprecated"] = True
            successor = getattr(action, "new_flag", None)
            if successor:
                row["replaced_by"] = str(successor)
        rows.append(row)
    return rows


def _choices(choices: Any) -> list[str] | None:
    """Choices as strings, in SGLang's order — sorted where SGLang keeps them in a set (its
    iteration order changes with every process's string hashing, and the table must not)."""
    if choices is None:
        return None
    texts = [str(c) for c in choices]
    return sorted(texts) if isinstance(choices, (set, frozenset)) else texts


def fingerprint(options: list[dict[str, Any]]) -> str:
    """A short hash of the options (order-independent): two builds with equal flags have equal
    fingerprints."""
    canonical = sorted(json.dumps(row, sort_keys=True) for row in options)
    return hashlib.sha256("\n".join(canonical).encode("utf-8")).hexdigest()[:16]


def dump_sglang() -> dict[str, Any]:
    """The table of the SGLang this interpreter imports: ``ServerArgs.add_cli_args`` on a fresh
    parser."""
    import sglang
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    options = dump_parser(parser)
    return {"sglang_version": str(getattr(sglang, "__version__", "unknown")), "source": SOURCE,
            "fingerprint": fingerprint(options), "options": options}


def source() -> str:
    """This module's text, for running it under another interpreter (``exec``) without spectune
    installed."""
    with open(__file__, encoding="utf-8") as handle:
        return handle.read()


if __name__ == "__main__":
    print(json.dumps(dump_sglang(), indent=0))
