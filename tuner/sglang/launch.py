"""One concrete server configuration and how it becomes a command line.

A ``ServerConfig`` is what every later layer passes around: the target deploys it, the store records
it, a report prints it. Rendering never goes through a shell string: we build an argv list and quote
it with ``shlex`` only for display or for a remote shell, so a value holding spaces, quotes, ``;``,
``$()`` or a newline stays one argument.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.sglang.options import OptionTable

FlagValue = bool | int | float | str | list[Any] | dict[str, Any]


@dataclass(frozen=True)
class ServerConfig:
    """SGLang flags (canonical option names, in a stable order) plus environment variables.

    ``flags`` holds study-file values: ``True``/``False`` for switches, numbers, strings, lists
    (nargs) or tables (JSON options). Two configs with equal flags and env are the same deployment.
    """

    flags: tuple[tuple[str, FlagValue], ...]
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def build(cls, flags: Mapping[str, FlagValue],
              env: Mapping[str, str] | None = None) -> ServerConfig:
        ordered = tuple(sorted(flags.items(), key=lambda kv: _flag_order(kv[0])))
        return cls(flags=ordered, env=tuple(sorted((env or {}).items())))

    @property
    def flag_dict(self) -> dict[str, FlagValue]:
        return dict(self.flags)

    def get(self, flag: str, default: Any = None) -> Any:
        return self.flag_dict.get(flag, default)

    def key(self) -> str:
        """A canonical string identifying this deployment (used to spot already-measured
        configurations)."""
        return json.dumps({"flags": self.flags, "env": self.env}, sort_keys=True, default=str)

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe form stored on each trial (``from_json`` gives the same config back)."""
        return {"flags": [[k, v] for k, v in self.flags], "env": [[k, v] for k, v in self.env]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServerConfig:
        return cls(flags=tuple((str(k), v) for k, v in data["flags"]),
                   env=tuple((str(k), str(v)) for k, v in data.get("env", [])))

    def argv(self, table: OptionTable) -> list[str]:
        """The server arguments, full option names only (never abbreviations)."""
        args: list[str] = []
        for name, value in self.flags:
            args.extend(flag_to_argv(table, name, value))
        return args


@dataclass(frozen=True)
class LaunchCommand:
    """An executable prefix (e.g. ``python -m sglang.launch_server``) + server arguments +
    environment."""

    prefix: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = field(default=())

    @property
    def argv(self) -> list[str]:
        return [*self.prefix, *self.args]

    def shell(self, *, multiline: bool = False) -> str:
        """A POSIX-shell rendering that reproduces ``argv`` exactly, with env assignments in
        front."""
        env = [f"{k}={shlex.quote(v)}" for k, v in self.env]
        if not multiline:
            return " ".join([*env, shlex.join(self.argv)])
        lines = [*env, shlex.join(list(self.prefix))]
        i = 0
        args = list(self.args)
        while i < len(args):
            # Keep each option with its values on one line for readability.
            j = i + 1
            while j < len(args) and not args[j].startswith("--"):
                j += 1
            lines.append(shlex.join(args[i:j]))
            i = j
        return " \\\n    ".join(lines)


def launch_command(prefix: Sequence[str], config: ServerConfig, table: OptionTable,
                   extra_args: Sequence[str] = ()) -> LaunchCommand:
    return LaunchCommand(tuple(prefix), (*config.argv(table), *extra_args), config.env)


def flag_to_argv(table: OptionTable, name: str, value: FlagValue) -> list[str]:
    spec = table.lookup(name)
    if spec.is_flag:
        if value is True:
            return [spec.name]
        return [spec.negation] if spec.negation is not None else []
    if isinstance(value, list) and spec.is_list:
        return [spec.name, *(format_scalar(v) for v in value)]
    if isinstance(value, dict | list):
        return [spec.name, json.dumps(value, separators=(",", ":"))]
    return [spec.name, format_scalar(value)]


def format_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        # repr gives the shortest round-tripping text: 0.85, not 0.8500000000000001.
        return repr(value)
    return str(value)


# Model and speculative flags first, like a hand-written unit file; everything else alphabetical.
_LEADING = ("--model-path", "--served-model-name", "--tp-size", "--speculative-algorithm",
            "--speculative-draft-model-path", "--speculative-num-steps", "--speculative-eagle-topk",
            "--speculative-num-draft-tokens")


def _flag_order(name: str) -> tuple[int, str]:
    return (_LEADING.index(name), "") if name in _LEADING else (len(_LEADING), name)
