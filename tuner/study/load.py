"""Load and validate a study file (TOML) as a whole.

Every problem becomes one line ``FILE: KEY: PROBLEM``; all of them are collected before anything is
raised, so a user fixes a broken file in one round. Each section is validated by its model
(tuner/study/models.py) on its own, so a broken ``[study]`` does not hide a broken ``[search]``; the
SGLang flags and the phases are then checked by hand (tuner/study/flags.py,
tuner/study/objective.py). Nothing here touches a server or a database.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
import types
import typing
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from tuner.core.errors import StudyFileError
from tuner.core.fields import did_you_mean
from tuner.sglang import versions
from tuner.sglang.hardware import Hardware
from tuner.sglang.options import OptionTable, normalize_flag
from tuner.study import consistency, flags, precision
from tuner.study.checks import CheckSection
from tuner.study.models import (
    MISSING_SECTION,
    BenchmarkSection,
    FinishSection,
    ObjectiveSection,
    SearchParam,
    ServerSection,
    StudyFile,
    StudySection,
)
from tuner.study.objective import objective
from tuner.study.problems import Problems
from tuner.study.spec import StudySpec, TargetSpec
from tuner.targets.registry import TARGET_KINDS, settings_model
from tuner.targets.settings import TargetSettings

#: How a ``Literal`` field's unknown value is named in its error line (default: "value").
_CHOICE_NOUNS = {"sampler": "sampler", "deploy": "action", "api": "API", "preset": "preset",
                 "mode": "mode"}


#: The longest text one value may hold, in UTF-8 bytes. A flag or environment value past it could
#: not be passed to the server at all (Linux takes at most 128 KiB per argument) and no real value
#: comes near it; checked before anything else, so a hostile value is refused at once rather than
#: after minutes of validation.
MAX_VALUE_BYTES = 65_536
#: The largest study file read at all (its values are each bounded above; this bounds the time to
#: parse it).
MAX_FILE_BYTES = 8 * 1_048_576
#: The largest magnitude of any number in the file: beyond every count, size and duration a study
#: can mean (each key has its own, tighter bound where one is known), and within a 64-bit integer.
MAX_MAGNITUDE = 1e18
#: The most text ``[server.flags]`` and ``[server.env]`` may hold together, in UTF-8 bytes: they
#: become the server's argument list and environment, which Linux bounds together (ARG_MAX, 2 MiB
#: with the default stack); each value is under ``MAX_VALUE_BYTES`` but many of them could still
#: make every start fail with E2BIG.
MAX_SERVER_BYTES = 524_288


def load_study_file(path: str | Path, table: OptionTable | None = None) -> StudySpec:
    """Read and validate ``path``; raise ``StudyFileError`` listing every problem.

    SGLang flags are checked against ``table`` — the target's own SGLang's, read at preflight
    (tuner.study.compat) — or, without one, the shipped table of ``[study] sglang_version`` (the
    nearest shipped one; the newest when it is not set), which ``spec.table_note`` then names."""
    path = Path(path)
    problems = Problems(path)
    if not path.exists():
        raise StudyFileError([f"{path}: file not found"])
    if not path.is_file():
        raise StudyFileError([f"{path}: not a file"])
    if path.stat().st_size > MAX_FILE_BYTES:
        raise StudyFileError(
            [f"{path}: {path.stat().st_size:,} bytes; a study file may hold at most "
             f"{MAX_FILE_BYTES:,}"])
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise StudyFileError([f"{path}: not a UTF-8 text file"]) from None
    except OSError as exc:  # unreadable (permissions), or gone since the check above
        raise StudyFileError([f"{path}: cannot be read: {exc.strerror or exc}"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise StudyFileError([f"{path}: invalid TOML: {exc}"]) from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise StudyFileError([f"{path}: invalid TOML: values nested too deeply"]) from None

    for key, problem in _unbounded(raw, ()):
        problems.add(key, problem)
    # one line per cause: a huge value first
    server_bytes = 0 if problems else _server_bytes(raw.get("server"))
    if server_bytes > MAX_SERVER_BYTES:
        problems.add("server",
                     f"its flags and environment hold {server_bytes:,} bytes together; at most "
                     f"{MAX_SERVER_BYTES:,} fit a server's command line and environment")
    if problems:  # the rest would only repeat them, slowly (a megabyte string through every check)
        raise StudyFileError(problems.lines)
    sections = tuple(StudyFile.model_fields)
    for name in raw:
        if name not in sections:
            problems.add(name, "unknown section" + did_you_mean(name, sections))
    context = {"base_dir": path.parent}
    study = _section(problems, raw, "study", StudySection, context)
    target = _target(problems, raw.get("target"), context)
    server = _section(problems, raw, "server", ServerSection, context)
    search = _search_section(problems, raw, context)
    # every flag [search] names, read or refused (the baseline's check tells one from the other)
    named_in_search = ({normalize_flag(k) for k in raw["search"]}
                       if isinstance(raw.get("search"), dict) else set())
    baseline = _section(problems, raw, "baseline", dict[str, Any], context)
    benchmark = _section(problems, raw, "benchmark", BenchmarkSection, context)
    objective_section = _section(problems, raw, "objective", ObjectiveSection, context)
    finish = _section(problems, raw, "finish", FinishSection, context)
    check = _section(problems, raw, "check", CheckSection, context)
    for key, problem in (check.check() if check is not None else ()):
        problems.add(f"check.{key}", problem)

    # What later checks need falls back to defaults, so one broken section does not hide problems
    # elsewhere.
    settings = (study or StudySection(name=path.stem)).to_settings(path)
    note = None
    if table is None:
        choice = versions.table_for(settings.sglang_version)
        table, note = choice.table, choice.note
    server_flags, server_env = flags.server(problems, server or ServerSection(), table)
    params = flags.search(problems, search, table, server_flags) if search is not None else ()
    # Checks across sections run only on sections that were read: on a refused one's defaults
    # they would report what is not there ("not tuned in [search]" for every baseline flag).
    if search is not None:
        baseline_flags = flags.baseline(problems, baseline or {}, table, params,
                                        named_in_search=named_in_search)
    else:
        baseline_flags = {}
    benchmark_problems = list(benchmark.check()) if benchmark is not None else []
    for key, problem in benchmark_problems:
        problems.add(f"benchmark.{key}", problem)
    benchmark_spec = (benchmark or BenchmarkSection()).to_spec()
    # the phases the weights and constraints name exist only in a [benchmark] that was read
    objective_spec = objective(
        problems, objective_section or ObjectiveSection(), benchmark_spec,
        phases_known=benchmark is not None and not any(
            key.startswith("phases") for key, _ in benchmark_problems))
    if benchmark is not None and benchmark.ci_target is not None:
        stated = [p.requests for p in benchmark.phases] if benchmark.phases else [None] * len(
            benchmark_spec.phases)
        benchmark_spec = dataclasses.replace(benchmark_spec, phases=precision.with_target(
            benchmark_spec.phases, objective_spec.weights, benchmark.ci_target, stated))
    if server is not None and search is not None:
        consistency.speculative_completeness(problems, server_flags, params)
    if target is not None and len(target.listed_hosts()) > 1 and settings.storage.startswith(
        "sqlite"):
        problems.add("target.hosts",
                     f"{len(target.listed_hosts())} hosts need a PostgreSQL [study] storage "
                     "(SQLite serves one tuner at a time; see docs/scaling.md)")
    if problems:
        raise StudyFileError(problems.lines)
    assert target is not None and finish is not None
    known = target.hardware()
    hardware = Hardware((server or ServerSection()).model_architecture or known.model_architecture,
                        known.compute_capability)
    spec = StudySpec(path=path, study=settings, target=TargetSpec(target),
                     server_flags=server_flags,
                     server_env=server_env, search=params, baseline=baseline_flags,
                     benchmark=benchmark_spec,
                     objective=objective_spec, finish=finish.deploy, hardware=hardware, table=table,
                     table_note=note, check=(check or CheckSection()).to_spec())
    consistency.check_space_is_feasible(problems, spec, table)
    if problems:
        raise StudyFileError(problems.lines)
    return spec


def _unbounded(value: Any, loc: tuple[str | int, ...]) -> Iterable[tuple[str, str]]:
    """``(key, problem)`` for every key and value of the file that no field could accept: text
    holding a NUL byte (no argument, path or environment variable can) or longer than
    ``MAX_VALUE_BYTES``, a number beyond ``MAX_MAGNITUDE``. Every section, every depth: the bound
    holds for keys that have no model of their own (flags, environment variables) as for those that
    do."""
    if isinstance(value, dict):
        for key, item in value.items():
            bad = list(_text_problems(_dotted(loc) or "(top level)", key, f"key {key[:20]!r}…"))
            yield from bad
            if not bad:  # a key is named in every line below it: only a sane one
                yield from _unbounded(item, (*loc, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unbounded(item, (*loc, index))
    elif isinstance(value, str):
        yield from _text_problems(_dotted(loc), value, "value")
    elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) \
            and abs(value) > MAX_MAGNITUDE:
        yield _dotted(loc), f"must be at most {MAX_MAGNITUDE:g} in size, not {float(value):g}"


def _server_bytes(server: Any) -> int:
    """The UTF-8 size of every key and value under ``[server]``: what its start puts in argv and the
    environment."""
    if isinstance(server, dict):
        return sum(len(str(key).encode("utf-8", "surrogatepass")) + _server_bytes(item)
                   for key, item in server.items())
    if isinstance(server, list):
        return sum(_server_bytes(item) for item in server)
    return len(str(server).encode("utf-8", "surrogatepass"))


def _text_problems(where: str, text: str, what: str) -> Iterable[tuple[str, str]]:
    if "\0" in text:
        yield where, f"the {what} holds a NUL byte (\\0), which no flag, path or variable can carry"
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_VALUE_BYTES:
        yield where, f"the {what} is {size:,} bytes long; at most {MAX_VALUE_BYTES:,} are allowed"


def _section(problems: Problems, raw: dict[str, Any], name: str, kind: Any,
             context: dict[str, Any]) -> Any:
    """The validated section ``name`` (its default when absent), or None after reporting its
    problems."""
    field = StudyFile.model_fields[name]
    if name not in raw:
        if field.is_required():
            problems.add(name, MISSING_SECTION[name])
            return None
        return field.get_default(call_default_factory=True)
    try:
        return _adapter(kind).validate_python(raw[name], context=context)
    except ValidationError as exc:
        _report(problems, exc, (name,), kind)
        return None


def _search_section(problems: Problems, raw: dict[str, Any],
                    context: dict[str, Any]) -> dict[str, SearchParam] | None:
    """``[search]`` entry by entry: a refused entry is reported and left out, and the others are
    still read (the baseline's check knows which were refused); None when the section is not a
    table."""
    data = raw.get("search")
    if not isinstance(data, dict):
        return _section(problems, raw, "search", dict[str, SearchParam], context)
    read = {}
    for key, value in data.items():
        try:
            read[key] = _adapter(SearchParam).validate_python(value, context=context)
        except ValidationError as exc:
            _report(problems, exc, ("search", key), SearchParam)
    return read


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def _target(problems: Problems, data: Any, context: dict[str, Any]) -> TargetSettings | None:
    """``[target]`` by the model of its kind, so errors name the kind's own keys."""
    if data is None:
        problems.add("target", MISSING_SECTION["target"])
        return None
    if not isinstance(data, dict):
        problems.add("target", f"must be a table, not {data!r}")
        return None
    kind = data.get("kind")
    if kind is None:
        problems.add("target.kind", f"missing (required; one of: {', '.join(TARGET_KINDS)})")
        return None
    if kind not in TARGET_KINDS:
        problems.add("target.kind",
                     f"unknown target kind {kind!r}" + did_you_mean(str(kind), TARGET_KINDS))
        return None
    model = settings_model(kind)
    try:
        settings = model.model_validate(data, context=context)
    except ValidationError as exc:
        _report(problems, exc, ("target",), model)
        return None
    before = len(problems.lines)
    for key, problem in settings.check():
        problems.add(f"target.{key}", problem)
    return settings if len(problems.lines) == before else None


# ----- pydantic errors as one line each -----------------------------------------------------------
def _report(problems: Problems, exc: ValidationError, prefix: tuple[str, ...], root: Any) -> None:
    seen: set[str] = set()
    for error in exc.errors(include_url=False):
        loc = tuple(part for part in error["loc"] if part != "[key]")
        key = _dotted(prefix + loc)
        if key in seen:  # one line per key: the first problem is the one to fix
            continue
        seen.add(key)
        problems.add(key, _message(error, root, loc))


def _dotted(loc: Iterable[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(error: ErrorDetails, root: Any, loc: tuple[str | int, ...]) -> str:
    error_type, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    wanted = {
        "int_type": "an integer", "int_from_float": "an integer", "float_type": "a number",
        "bool_type": "true or false", "string_type": "a string", "list_type": "a list",
        "tuple_type": "a list",
        "dict_type": "a table", "model_type": "a table", "model_attributes_type": "a table",
    }.get(error_type)
    if wanted:
        return f"must be {wanted}, not {value!r}"
    relation = {"greater_than": (">", "gt"), "greater_than_equal": ("≥", "ge"),
                "less_than": ("<", "lt"), "less_than_equal": ("≤", "le")}.get(error_type)
    if relation:
        bound = ctx.get(relation[1])
        # "≥ 0", not "≥ 0.0"
        bound = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        return f"must be {relation[0]} {bound}, not {value!r}"
    if error_type == "missing":
        return "missing (required)"
    if error_type == "extra_forbidden":
        return "unknown key" + did_you_mean(str(loc[-1]), _keys_at(root, loc[:-1]))
    if error_type == "literal_error":
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        noun = _CHOICE_NOUNS.get(str(loc[-1]), "value")
        return f"unknown {noun} {value!r}" + did_you_mean(str(value), choices)
    if error_type == "finite_number":
        return f"must be a finite number, not {value!r}"
    if error_type in ("too_short", "string_too_short"):
        return "must not be empty"
    if error_type == "value_error":
        return str(ctx.get("error", error["msg"]))
    return str(error["msg"])


def _keys_at(root: Any, loc: tuple[str | int, ...]) -> list[str]:
    """The keys the table at ``loc`` (inside ``root``) allows: for did-you-mean hints on unknown
    keys."""
    kind = root
    for part in loc:
        kind = _unwrap(kind)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            field = kind.model_fields.get(str(part))
            kind = field.annotation if field is not None else None
        else:
            args = typing.get_args(kind)
            kind = args[-1] if args else None
    kind = _unwrap(kind)
    return list(kind.model_fields) if isinstance(kind, type) and issubclass(kind, BaseModel) else []


def _unwrap(kind: Any) -> Any:
    """``X`` of ``Annotated[X, ...]`` and ``X | None``."""
    while True:
        if typing.get_origin(kind) is typing.Annotated:
            kind = typing.get_args(kind)[0]
            continue
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(args) == 1:
            kind = args[0]
            continue
        return kind
