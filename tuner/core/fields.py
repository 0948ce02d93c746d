"""Value types shared by every study-file model: durations, ports, host lists, paths beside the
study file.

Each type validates TOML values strictly (TOML is typed: ``"5"`` is never an integer) and says what
it wants in one line, so every problem stays ``FILE: KEY: PROBLEM``. Paths are resolved against the
study file's folder, which the loader passes as validation context (``{"base_dir": Path}``).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationInfo, WithJsonSchema

from tuner.core.durations import parse_duration

#: Every study-file table: frozen, strict, unknown keys rejected, no NaN or infinity in any float.
MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class FileModel(BaseModel):
    """Base of every table in a study file."""

    model_config = MODEL_CONFIG


def did_you_mean(word: str, options: Iterable[str]) -> str:
    options = list(options)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return (f" (did you mean {close[0]!r}?)" if close
            else f" (expected one of: {', '.join(options)})")


def base_dir(info: ValidationInfo) -> Path:
    context = info.context or {}
    return Path(context.get("base_dir", "."))


def resolve_path(value: str, info: ValidationInfo) -> Path:
    """A path as written in the study file: relative to the file's folder, ``~`` expanded."""
    return (base_dir(info) / Path(value).expanduser()).resolve()


#: The longest duration a study file may give: past a year no wait or study means anything, and an
#: event loop's timer cannot take an arbitrary float (1e300 seconds overflows it).
MAX_DURATION_S = 366 * 86_400


def duration_value(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(
            f"must be a duration such as \"30m\" or a number of seconds, not {value!r}")
    seconds = parse_duration(value)
    if not math.isfinite(seconds):
        raise ValueError(f"must be a finite duration, not {value!r}")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"must be at most 366 days ({MAX_DURATION_S:,} s), not {value!r}")
    return seconds


def _number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number, not {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, not {value!r}")
    return value


def _host_list(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be a list of strings, not {value!r}")
    if not value:
        raise ValueError("must not be empty (leave it out for one host)")
    seen: set[str] = set()
    for host in value:
        if not is_host_name(host):
            raise ValueError(f"not a host name: {host!r}")
        if host in seen:
            raise ValueError(f"{host!r} is listed twice (one worker per host)")
        seen.add(host)
    return tuple(value)


def is_host_name(host: str) -> bool:
    return bool(host.strip()) and not any(c.isspace() or c in "/\\" for c in host)


def _host_name(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {value!r}")
    if not is_host_name(value):
        raise ValueError(f"not a host name: {value!r}")
    return value


def _command(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be a list of strings, not {value!r}")
    if not value:
        raise ValueError("must not be empty (e.g. [\"python3\", \"-m\", \"sglang.launch_server\"])")
    return tuple(value)


_DURATION_TEXT = {"type": "string", "pattern": r"^\s*(\d+(\.\d+)?\s*(ms|h|m|s)?\s*)+$"}
#: Seconds, written as a number or ``"90s"``, ``"30m"``, ``"1h30m"``.
Duration = Annotated[float, PlainValidator(duration_value),
                     WithJsonSchema({"anyOf": [{"type": "number", "minimum": 0}, _DURATION_TEXT]})]
PositiveDuration = Annotated[float, PlainValidator(duration_value), Field(gt=0),
                             WithJsonSchema({"anyOf": [
                                 {"type": "number", "exclusiveMinimum": 0}, _DURATION_TEXT]})]
#: An integer or a float (never a boolean), finite.
Number = Annotated[int | float, PlainValidator(_number), WithJsonSchema({"type": "number"})]
Port = Annotated[int, Field(ge=1, le=65535)]
HostList = Annotated[tuple[str, ...], PlainValidator(_host_list), WithJsonSchema({
    "type": "array", "items": {"type": "string", "minLength": 1, "pattern": r"^[^\s/\\]+$"},
    "minItems": 1, "uniqueItems": True,
})]
HostName = Annotated[str, PlainValidator(_host_name),
                     WithJsonSchema({"type": "string", "pattern": r"^[^\s/\\]+$"})]
Command = Annotated[tuple[str, ...], PlainValidator(_command), WithJsonSchema({
    "type": "array", "items": {"type": "string"}, "minItems": 1,
})]
