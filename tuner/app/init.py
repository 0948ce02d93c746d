"""``spectune init``: a commented study file for one target kind and model, valid as written.

Every comment that explains a key is that key's description in its pydantic model
(tuner/study/models.py, and the kind's settings model in tuner/targets/) — the text
docs/study-file.md is generated from — so the two never disagree. Keys the file sets are written
plainly; the others are written commented out with their default (or an example), ready to
uncomment. What only the user knows (the GPU host, the unit) gets a placeholder such as
``gpu-host.example`` that validates but never resolves, so nothing is contacted by mistake.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from tuner.app.init_from_unit import UnitStart
from tuner.app.init_templates import TEMPLATES, search_of
from tuner.core.durations import format_duration
from tuner.core.errors import StudyFileError, UsageError
from tuner.core.fields import duration_value
from tuner.study.load import load_study_file
from tuner.study.models import (
    BenchmarkSection,
    FinishSection,
    ObjectiveSection,
    PhaseSection,
    SearchParam,
    ServerSection,
    StudyFile,
    StudySection,
)
from tuner.targets.registry import TARGET_KINDS, settings_model

WIDTH = 110
#: Examples of keys without a default (written commented out); everything else shows its default.
EXAMPLES: dict[str, Any] = {
    "storage": "postgresql+psycopg://tuner@db.example/spectune", "timeout": "8h", "seed": 1,
    "heartbeat_grace": "5m", "model_architecture": "Qwen3ForCausalLM", "temperature": 0.7,
    "ignore_eos": False, "model": "my-model", "requests": 8, "duration": "2m", "ci_target": 0.02,
}
#: Tuned flags of a speculative-decoding study: the draft tree and the memory flags around it.
SEARCH: dict[str, dict[str, Any]] = {
    "speculative-num-steps": {"min": 1, "max": 8},
    "speculative-eagle-topk": {"choices": [1, 2, 4]},
    "speculative-num-draft-tokens": {"min": 2, "max": 16},
    "mem-fraction-static": {"min": 0.78, "max": 0.92, "step": 0.02},
    "cuda-graph-max-bs-decode": {"choices": [32, 64, 128]},
}
#: A configuration inside SEARCH that SGLang accepts; the user replaces it with what their server
#: runs.
BASELINE: dict[str, Any] = {"speculative-num-steps": 3, "speculative-eagle-topk": 1,
                            "speculative-num-draft-tokens": 4, "mem-fraction-static": 0.86,
                            "cuda-graph-max-bs-decode": 64}
PHASES = [{"concurrency": 1, "requests": 8, "warmup": 1},
          {"concurrency": 64, "requests": 256, "warmup": 8}]


@dataclass(frozen=True)
class InitRequest:
    kind: str
    model: str | None = None
    draft: str | None = None
    algorithm: str = "EAGLE3"
    name: str | None = None
    # None: what the target kind says (the simulator: its profile's GPUs), else 1
    tp_size: int | None = None
    #: A study over the whole speculative choice for this kind of model
    #: (tuner/app/init_templates.py); None: the draft tree of ``algorithm`` alone.
    template: str | None = None
    #: ``--from-unit``: what a running unit runs (its command, flags and the tuned flags' values as
    #: baseline).
    unit: UnitStart | None = None


def write_study_file(request: InitRequest, output: Path, *, force: bool = False) -> Path:
    """Write the study file ``request`` describes to ``output``; refuses to replace a file unless
    ``force``."""
    if output.exists() and not force:
        raise UsageError(f"{output}: already exists (use --force to overwrite it)")
    if not output.parent.is_dir():
        raise UsageError(f"{output}: directory {output.parent} does not exist")
    text = study_file_text(request, output)
    # Checked as `spectune validate` checks it, beside its final place (relative paths resolve
    # alike), before it replaces anything: a file init writes always validates.
    draft = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    draft.write_text(text, encoding="utf-8")
    try:
        load_study_file(draft)
    except StudyFileError as exc:
        draft.unlink()
        raise StudyFileError([line.replace(str(draft), f"{output} (as written by init)")
                              for line in exc.problems]) from None
    draft.replace(output)
    return output


def study_file_text(request: InitRequest, output: Path) -> str:
    """The study file's text, as it will read at ``output`` (relative paths start from its
    folder)."""
    name = request.name or _slug(output.stem)
    if request.kind not in TARGET_KINDS:
        raise UsageError(f"unknown target kind {request.kind!r} (known: {', '.join(TARGET_KINDS)})")
    target = settings_model(request.kind)
    template = TEMPLATES.get(request.template) if request.template is not None else None
    if request.template is not None and template is None:
        raise UsageError(f"unknown template {request.template!r} (known: {', '.join(TEMPLATES)})")
    model_asked = request.model
    if template is not None and model_asked is None and request.kind == "simulated":
        model_asked = template.simulated_model
    try:
        starter = target.starter(model_asked)
        kind_flags = target.starter_flags(model_asked)
    except ValueError as exc:
        raise UsageError(f"--model: {exc}") from None
    given = {"model-path": request.model, "tp-size": request.tp_size,
             "speculative-draft-model-path": request.draft}
    flags: dict[str, Any] = {"model-path": None, "tp-size": 1,
                             "speculative-algorithm": request.algorithm,
                             "speculative-draft-model-path": None, "enable-metrics": True}
    flags.update(kind_flags)
    flags.update({k: v for k, v in given.items() if v is not None})
    model = flags["model-path"]
    if model is None:
        raise UsageError(
            f"--model is required for target {request.kind} (e.g. --model Qwen/Qwen3-8B)")
    flags = {k: v for k, v in flags.items() if v is not None}
    search, baseline = SEARCH, BASELINE
    unit_note = ""
    if request.unit is not None:
        starter, flags, search, baseline, unit_note = _from_unit(request.unit, starter, flags)
    if template is not None:
        search, baseline = search_of(template), template.baseline
        flags.pop("speculative-algorithm", None)  # tuned among the template's branches
        if not template.draft_model:
            flags.pop("speculative-draft-model-path", None)

    schema = _schema_path(output)
    out = [f"#:schema {schema}"] if schema else []
    what = (f"which kind of speculation for {model}, with {template.description},"
            if template is not None
            else f"{request.algorithm} speculative decoding of {model}")
    out += [f"# A spectune study: {what} on a {request.kind} target.",
           "# Written by `spectune init`; every key is explained above it (all keys: "
           "docs/study-file.md).",
           "# Check the values (placeholders such as gpu-host.example stand for what only you "
           "know), then:",
           f"#   spectune validate --plan {output}    # what would run, and for how long",
           f"#   spectune tune {output}"]
    out += _section("study", StudySection,
                    {"name": name, "n_trials": 30, "timeout": "8h", "sampler": "auto"})
    out += _section("target", target, {"kind": request.kind, **starter},
                    examples=target.starter_examples())
    out += _section("server", ServerSection, {}, skip=("flags", "env"))
    missing_draft = ("speculative-draft-model-path" not in flags
                     and (template is None or template.draft_model))
    out += _table("server.flags", ServerSection, "flags", flags,
                  note="Set the draft model unless the model has a built-in MTP head (SGLang then "
                       "drafts with the model itself)." if missing_draft else "",
                  example={"speculative-draft-model-path": "org/draft-model"} if missing_draft
                  else None)
    out += _table("server.env", ServerSection, "env", {}, example={"CUDA_VISIBLE_DEVICES": "0"})
    out += _table("search", StudyFile, "search", search, note=_doc(SearchParam))
    out += _table("baseline", StudyFile, "baseline", baseline,
                  note=unit_note
                  or "Replace these with what your server runs today: the study measures them "
                     "first, and every score is relative to them (1.0 = the "
                     "baseline).")
    out += _section("benchmark", BenchmarkSection,
                    {"api": "chat", "dataset": "builtin", "max_tokens": 256,
                      "phases": PHASES}, item=PhaseSection)
    out += _section("objective", ObjectiveSection, {"weights": {"c1": 0.5, "c64": 0.5},
                                                     "constraints": ["error_rate <= 0.01"]})
    out += _section("finish", FinishSection, {"deploy": "original"})
    return "\n".join(out) + "\n"


def _from_unit(unit: UnitStart, starter: dict[str, Any], flags: dict[str, Any]
               ) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, Any]], dict[str, Any],
                          str]:
    """The unit's command as [target], [server.flags], [search] and [baseline]: the tuned flags it
    sets are the baseline (their ranges widened to hold them); every other option is a fixed flag,
    so nothing is dropped."""
    target = {**starter, "host": unit.host, "unit": unit.unit, "command": list(unit.command),
              **{k: v for k, v in unit.ssh.items() if v is not None}}
    if unit.server_port is not None:
        target["server_port"] = unit.server_port
    if unit.listen_host is not None:
        target["listen_host"] = unit.listen_host
    tuned = {k: v for k, v in unit.flags.items() if k in SEARCH}
    fixed = {k: v for k, v in unit.flags.items() if k not in SEARCH}
    if not tuned:  # nothing the study tunes is set: a starting point, said as such
        speculative = {"speculative-algorithm": flags.get("speculative-algorithm", "EAGLE3")}
        return target, {**speculative, **fixed}, SEARCH, BASELINE, (
            f"{unit.unit} sets none of the tuned flags (SGLang chooses them): this baseline is a "
            "starting point, not what the unit runs — replace it with the values the server runs "
            "today.")
    search: dict[str, dict[str, Any]] = {}
    for key, value in tuned.items():
        param = dict(SEARCH[key])
        if "choices" in param and value not in param["choices"]:
            param["choices"] = sorted([*param["choices"], value])
        elif "min" in param:
            param["min"], param["max"] = min(param["min"], value), max(param["max"], value)
        search[key] = param
    return target, fixed, search, tuned, (
        f"What {unit.unit} on {unit.host} runs today (read from its "
        "ExecStart): the study measures it first, and every "
        "score is relative to it (1.0 = the baseline).")


# ----- rendering ----------------------------------------------------------------------------------
def _section(name: str, model: type[BaseModel], values: Mapping[str, Any], *,
             examples: Mapping[str, Any] | None = None,
             skip: tuple[str, ...] = (), item: type[BaseModel] | None = None) -> list[str]:
    """``[name]`` with its description, then every key of ``model``: set (``values``) or commented
    out."""
    examples = {**EXAMPLES, **(examples or {})}
    out = ["", *_comment(_doc(model) or StudyFile.model_fields[name].description or ""),
           f"[{name}]"]
    for key, field in model.model_fields.items():
        if key in skip:
            continue
        out += _comment(field.description or "")
        if item is not None and key == "phases":
            out += _comment(f"Each phase: {_doc(item)}")
            for k, f in item.model_fields.items():
                out += _comment(f"{k}: {f.description}", indent="#   ")
        duration = _is_duration(field)
        if key in values:
            out.append(f"{_key(key)} = {_value(values[key])}")
            continue
        default = field.get_default(call_default_factory=True)
        shown = examples.get(key) if default in (None, PydanticUndefined, (), [], {}) else default
        if shown is not None:
            out.append(f"# {_key(key)} = {_value(_duration_text(shown) if duration else shown)}")
    return out


def _is_duration(field: FieldInfo) -> bool:
    return any(getattr(m, "func", None) is duration_value for m in field.metadata)


def _duration_text(value: Any) -> Any:
    """``900.0`` as ``"15m00s"``: what a user would write (whole seconds only; the rest stay
    numbers)."""
    if isinstance(value, int | float) and value >= 1 and float(value).is_integer():
        return format_duration(value)
    return value


def _table(name: str, model: type[BaseModel], key: str, values: Mapping[str, Any], *,
           note: str = "", example: Mapping[str, Any] | None = None) -> list[str]:
    """A free-form table (flags, env, search, baseline): its field's description, then its
    entries."""
    out = ["", *_comment(model.model_fields[key].description or ""), *_comment(note), f"[{name}]"]
    out += [f"{_key(k)} = {_value(v)}" for k, v in values.items()]
    out += [f"# {_key(k)} = {_value(v)}" for k, v in (example or {}).items()]
    return out


def _comment(text: str, indent: str = "# ") -> list[str]:
    text = _prose(text).strip()
    # a list item's continuation lines hang under it
    more = indent if indent == "# " else indent + "  "
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=more,
                         break_on_hyphens=False, break_long_words=False) if text else []


def _doc(model: type[BaseModel]) -> str:
    """The model's docstring, first paragraph (the rest is for readers of the code)."""
    return " ".join((model.__doc__ or "").strip().split("\n\n")[0].split())


def _prose(text: str) -> str:
    return text.replace("``", "`")


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _value(value: Any) -> str:
    """One TOML value, inline (tomli-w writes tables as sections; a study file reads better
    inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        # JSON's string escapes are valid TOML basic strings
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        items = [_value(v) for v in value]
        if any(isinstance(v, Mapping) for v in value):
            return "[\n" + "".join(f"  {i},\n" for i in items) + "]"
        return "[" + ", ".join(items) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {value!r}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "study"


def _schema_path(output: Path) -> str | None:
    """The JSON Schema editors check the file with, relative to it (a checkout's docs/); None when
    absent."""
    from tuner.study.reference import SCHEMA_PATH

    if not SCHEMA_PATH.is_file():
        return None
    folder = output.resolve().parent
    if not folder.is_relative_to(SCHEMA_PATH.parents[1]):
        return str(SCHEMA_PATH)  # outside the checkout: a relative path would climb out of it
    return os.path.relpath(SCHEMA_PATH, folder)
