"""SGLang's server option table, one JSON data file per SGLang version.

The table is a dump of ``ServerArgs.add_cli_args`` (option strings, dest, type name, default,
choices, nargs). From it we answer "is this a real flag, and is this a valid value for it?" and
build an argparse parser that behaves like ``python -m sglang.launch_server``. The files are
generated from the real wheels by bench/sglang_versions/tables.py (never typed by hand): adding a
release means running it, nothing else changes (docs/sglang-fidelity.md).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any

from packaging.version import Version

from tuner.sglang import dump

_DATA_PACKAGE = "tuner.sglang"
_DATA_PREFIX = "sglang-"


@dataclass(frozen=True)
class OptionSpec:
    """One SGLang server option as the option table describes it."""

    opts: tuple[str, ...]
    dest: str
    type_name: str
    default: str
    choices: tuple[str, ...] | None
    nargs: int | str | None
    required: bool = False
    #: SGLang marks this spelling deprecated (its parser still takes it); ``replaced_by`` names the
    #: successor.
    deprecated: bool = False
    replaced_by: str | None = None

    @property
    def name(self) -> str:
        """The canonical (first) option string, e.g. ``--model-path``."""
        return self.opts[0]

    @property
    def is_flag(self) -> bool:
        """True for options that take no value (store_true, or a --x/--no-x pair)."""
        return self.nargs == 0

    @property
    def negation(self) -> str | None:
        """The ``--no-x`` spelling of a boolean pair, if this option has one."""
        return next((o for o in self.opts if o.startswith("--no-")), None)

    @property
    def is_list(self) -> bool:
        return self.nargs in ("+", "*")

    @property
    def value_kind(self) -> str:
        """One of ``bool``, ``int``, ``float``, ``json``, ``str`` — what a study file value must
        look like."""
        if self.is_flag:
            return "bool"
        if self.type_name in ("int", "human_readable_int"):
            return "int"
        if self.type_name == "float":
            return "float"
        if self.type_name in ("loads", "json_list_type", "parse_cuda_graph_config_arg"):
            return "json"
        return "str"


class UnknownOption(LookupError):
    def __init__(self, flag: str, suggestions: list[str]) -> None:
        self.flag = flag
        self.suggestions = suggestions
        hint = f" (did you mean {', '.join(suggestions)}?)" if suggestions else ""
        super().__init__(f"unknown SGLang option {flag}{hint}")


class AmbiguousOption(LookupError):
    """An abbreviation that argparse would refuse: it matches several options."""

    def __init__(self, flag: str, matches: list[str]) -> None:
        self.flag = flag
        self.matches = matches
        super().__init__(f"ambiguous option: {flag} could match {', '.join(matches)}")


def _human_readable_int(text: str) -> int:
    """SGLang's ``human_readable_int``: SI suffixes (1k = 10³, 1M = 10⁶, decimals allowed) and IEC
    ones (1Ki = 2¹⁰, integers only), case-sensitive; its own error texts, which argparse prints
    after the flag."""
    text = text.strip()
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", text)
    if match:
        number, suffix = match.groups()
        if suffix in iec:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. Use an integer "
                    f"IEC value such as '{int(Decimal(number))}{suffix}', or an SI value such as "
                    f"'{number}{suffix[0]}'.")
            return int(number) * iec[suffix]
        return int(Decimal(number) * si[suffix])
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{text}'. Use a plain integer, SI suffixes (1k, 1M), or IEC "
            "suffixes (1Ki, 1Mi). Suffixes are case-sensitive.") from None


def _json_list(text: str) -> list[Any]:
    value = json.loads(text)
    if not isinstance(value, list):
        raise ValueError(f"expected a JSON list, got {text!r}")
    return value


def _nullable_str(text: str) -> str | None:
    return None if text.lower() in ("none", "null") else text


_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "human_readable_int": _human_readable_int,
    "loads": json.loads,
    "json_list_type": _json_list,
    "parse_cuda_graph_config_arg": json.loads,
    "parse_cuda_graph_backend_arg": str,
    "nullable_str": _nullable_str,
}


class OptionTable:
    """All options of one SGLang version, with lookup that mirrors argparse's prefix matching."""

    def __init__(self, version: str, options: Iterable[OptionSpec]) -> None:
        self.version = version
        self.options: tuple[OptionSpec, ...] = tuple(options)
        self._by_opt: dict[str, OptionSpec] = {o: spec for spec in self.options for o in spec.opts}
        self._fingerprint: str | None = None

    # ----- construction ---------------------------------------------------------------------------
    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OptionTable:
        options = []
        for row in data["options"]:
            choices = row.get("choices")
            options.append(
                OptionSpec(
                    opts=tuple(row["opts"]),
                    dest=row["dest"],
                    type_name=str(row["type"]),
                    default=str(row["default"]),
                    choices=tuple(str(c) for c in choices) if choices is not None else None,
                    nargs=row.get("nargs"),
                    required=bool(row.get("required", False)),
                    deprecated=bool(row.get("deprecated", False)),
                    replaced_by=row.get("replaced_by"),
                )
            )
        return cls(str(data["sglang_version"]), options)

    def to_json(self) -> dict[str, Any]:
        """The table in the shipped data format (what ``from_json`` reads; tuner/sglang/dump.py
        writes it)."""
        return {"sglang_version": self.version, "source": dump.SOURCE,
                "fingerprint": self.fingerprint, "options": self._rows()}

    def _rows(self) -> list[dict[str, Any]]:
        rows = []
        for spec in self.options:
            row: dict[str, Any] = {"opts": list(spec.opts), "dest": spec.dest,
                                   "type": spec.type_name, "default": spec.default,
                                   "choices": list(spec.choices) if spec.choices is not None
                                   else None, "nargs": spec.nargs}
            if spec.required:
                row["required"] = True
            if spec.deprecated:
                row["deprecated"] = True
            if spec.replaced_by:
                row["replaced_by"] = spec.replaced_by
            rows.append(row)
        return rows

    @property
    def fingerprint(self) -> str:
        """A hash of the options (not of the version): two builds whose parsers agree have the same
        one."""
        if self._fingerprint is None:
            self._fingerprint = dump.fingerprint(self._rows())
        return self._fingerprint

    def is_deprecated(self, flag: str) -> bool:
        spec = self._by_opt.get(normalize_flag(flag))
        return spec is not None and spec.deprecated

    # ----- lookup ---------------------------------------------------------------------------------
    @property
    def option_strings(self) -> list[str]:
        return list(self._by_opt)

    def by_option(self, flag: str) -> OptionSpec | None:
        """The option ``flag`` names exactly (no abbreviation), or None."""
        return self._by_opt.get(normalize_flag(flag))

    def lookup(self, flag: str, *, allow_abbrev: bool = False) -> OptionSpec:
        """The option ``flag`` names exactly (or, with ``allow_abbrev``, as argparse's unique
        prefix).

        Raises ``AmbiguousOption`` for a prefix of several options — even without ``allow_abbrev``
        when the flag is not an exact name, because that is what the real server would say about it
        — and ``UnknownOption`` with close spellings otherwise.
        """
        flag = normalize_flag(flag)
        if flag in self._by_opt:
            return self._by_opt[flag]
        matches = sorted({self._by_opt[o].name for o in self._by_opt if o.startswith(flag)})
        if len(matches) > 1:
            raise AmbiguousOption(flag, matches)
        if len(matches) == 1 and allow_abbrev:
            return self._by_opt[matches[0]]
        suggestions = matches or difflib.get_close_matches(flag, self.option_strings, n=3,
                                                           cutoff=0.75)
        raise UnknownOption(flag, suggestions)

    # ----- values ---------------------------------------------------------------------------------
    def check_value(self, spec: OptionSpec, value: Any) -> str | None:
        """A one-line problem with ``value`` (as written in a study file) for ``spec``, or None if
        valid."""
        kind = spec.value_kind
        if kind == "bool":
            if not isinstance(value, bool):
                return f"{spec.name} is a switch and takes true or false, not {value!r}"
            return None
        values = value if isinstance(value, list) else [value]
        if isinstance(value, list) and not spec.is_list:
            return f"{spec.name} takes one value, not a list"
        if spec.is_list and spec.nargs == "+" and not values:
            return f"{spec.name} needs at least one value"
        for item in values:
            problem = _check_scalar(spec, kind, item)
            if problem:
                return problem
        return None

    def build_parser(self, *, allow_abbrev: bool,
                     prog: str = "launch_server") -> argparse.ArgumentParser:
        """An argparse parser equivalent to SGLang's for this version.

        ``allow_abbrev=True`` reproduces the real server (``--cuda-graph-max-bs`` → "ambiguous
        option"); tests use ``allow_abbrev=False`` to prove spectune always emits full option names.
        """
        parser = argparse.ArgumentParser(prog=prog, allow_abbrev=allow_abbrev)
        for spec in self.options:
            kwargs: dict[str, Any] = {"dest": spec.dest}
            if spec.is_flag:
                if spec.negation is not None:
                    kwargs["action"] = argparse.BooleanOptionalAction
                    kwargs["default"] = _parse_default(spec.default)
                    opts = [o for o in spec.opts if not o.startswith("--no-")]
                else:
                    kwargs["action"] = "store_true"
                    kwargs["default"] = _parse_default(spec.default)
                    opts = list(spec.opts)
            else:
                opts = list(spec.opts)
                kwargs["type"] = _CONVERTERS.get(spec.type_name, str)
                kwargs["default"] = _parse_default(spec.default)
                if spec.nargs is not None:
                    kwargs["nargs"] = spec.nargs
                if spec.required:
                    kwargs["required"] = True
                if spec.choices is not None:
                    kwargs["choices"] = [_coerce_choice(spec, c) for c in spec.choices]
            parser.add_argument(*opts, **kwargs)
        return parser


def normalize_flag(flag: str) -> str:
    """Study files may name options with or without the leading dashes."""
    flag = flag.strip()
    return flag if flag.startswith("-") else f"--{flag}"


def _check_scalar(spec: OptionSpec, kind: str, item: Any) -> str | None:
    if isinstance(item, bool):
        return f"{spec.name} takes a {kind} value, not {str(item).lower()}"
    if kind == "int" and not isinstance(item, int):
        return f"{spec.name} takes an integer, not {item!r}"
    if kind == "float" and not isinstance(item, int | float):
        return f"{spec.name} takes a number, not {item!r}"
    if kind == "str" and not isinstance(item, str | int | float):
        return f"{spec.name} takes a string, not {item!r}"
    if kind == "json" and not isinstance(item, str | dict | list):
        return f"{spec.name} takes JSON (a string or a table), not {item!r}"
    if spec.choices is not None and str(item) not in spec.choices:
        close = difflib.get_close_matches(str(item), spec.choices, n=3, cutoff=0.5)
        hint = (f"; did you mean {', '.join(close)}?" if close
                else f"; choices: {', '.join(spec.choices)}")
        return f"{spec.name} does not accept {item!r}{hint}"
    return None


def _parse_default(text: str) -> Any:
    """Defaults are stored as Python reprs ('None', 'False', "'auto'", '16384', '[]')."""
    try:
        return json.loads(text.replace("'", '"').replace("None", "null").replace("True",
                                                                                 "true").replace(
            "False", "false"))
    except (ValueError, TypeError):
        return text


def _coerce_choice(spec: OptionSpec, choice: str) -> Any:
    converter = _CONVERTERS.get(spec.type_name, str)
    try:
        return converter(choice)
    except (ValueError, TypeError):
        return choice


def available_versions() -> list[str]:
    """SGLang versions for which an option table ships with spectune."""
    data = resources.files(_DATA_PACKAGE).joinpath("data")
    names = [p.name for p in data.iterdir() if p.name.startswith(_DATA_PREFIX)
             and p.name.endswith(".json")]
    return sorted(n[len(_DATA_PREFIX) : -len(".json")] for n in names)


def newest_version() -> str:
    """The newest release spectune ships a table for."""
    return max(available_versions(), key=Version)


@cache
def load_option_table(version: str | None = None) -> OptionTable:
    """The shipped option table of one SGLang version (None: the newest shipped; cached: a file is
    ~100 KB). Exact versions only: ``tuner.sglang.versions.table_for`` finds the nearest shipped
    table of any release."""
    version = version or newest_version()
    path = resources.files(_DATA_PACKAGE).joinpath("data", f"{_DATA_PREFIX}{version}.json")
    if not path.is_file():
        known = ", ".join(available_versions())
        raise LookupError(f"no option table for SGLang {version} (shipped: {known})")
    return OptionTable.from_json(json.loads(path.read_text(encoding="utf-8")))
