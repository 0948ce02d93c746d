"""SGLang flags in a study file: names looked up in the option table of its SGLang version, values
checked, and the space the tuned flags span checked as a whole.

Hand-written on purpose: which flags exist and what they take comes from SGLang's option tables
(tuner/sglang/data), not from the study-file schema; the rules between flags are SGLang's
(tuner/sglang/rules.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from typing import Any

from tuner.sglang import versions
from tuner.sglang.launch import FlagValue
from tuner.sglang.options import (
    AmbiguousOption,
    OptionSpec,
    OptionTable,
    UnknownOption,
    normalize_flag,
)
from tuner.sglang.resolution import SPECULATIVE_ALGORITHMS
from tuner.study import branches
from tuner.study.models import SearchParam, ServerSection
from tuner.study.problems import Problems
from tuner.study.spec import ParamSpec
from tuner.study.values import ENV_NAME_PATTERN

#: The target decides where the server listens; a study cannot override it per trial.
TARGET_OWNED_OPTIONS = ("--host", "--port")
#: A range with more grid points than this is a typo'd step, not a search space (and would stall
#: enumeration).
MAX_GRID_POINTS = 1_000_000

#: Values SGLang would accept syntactically but that can never run: (low, high, inclusive-low?).
SEMANTIC_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "--mem-fraction-static": (0.0, 1.0, False),
    "--speculative-num-steps": (1, 64, True),
    "--speculative-eagle-topk": (1, 64, True),
    "--speculative-num-draft-tokens": (2, 1024, True),
    "--max-running-requests": (1, 1 << 20, True),
    "--cuda-graph-max-bs-decode": (1, 1 << 16, True),
    "--page-size": (1, 1 << 16, True),
    "--chunked-prefill-size": (-1, 1 << 24, True),
    "--tp-size": (1, 1024, True),
}


def _resolve_flag(problems: Problems, key: str, flag: str, table: OptionTable) -> OptionSpec | None:
    """The option a study-file key names; unknown, ambiguous and abbreviated names are problems.

    A setting SGLang renamed is found under the name this table's release gives it
    (``--cuda-graph-max-bs`` in 0.5.10 and older, ``--cuda-graph-max-bs-decode`` from 0.5.14): a
    study file may use either name and runs on every release that has the setting. The renames come
    from SGLang's own parsers (tuner.sglang.versions).
    """
    spelled = versions.spelling_in(flag, table)
    if spelled is not None:
        flag = spelled
    try:
        spec = table.lookup(flag)
    except AmbiguousOption as exc:
        problems.add(key, f"ambiguous SGLang {table.version} option {exc.flag} (could match "
                     f"{', '.join(exc.matches)}); use the full name: one of "
                     f"{', '.join(exc.matches)}")
        return None
    except UnknownOption as exc:
        prefixed = [o for o in exc.suggestions if o.startswith(exc.flag)]
        if prefixed:
            problems.add(key,
                         f"{exc.flag} is an abbreviation; write the full option name {prefixed[0]}")
        else:
            problems.add(key, _unknown(exc, table))
        return None
    if spec.name in TARGET_OWNED_OPTIONS:
        problems.add(key, f"{spec.name} is set by the target; use [target] "
                     f"{'port' if spec.name == '--port' else 'settings'} instead")
        return None
    return spec


def _unknown(exc: UnknownOption, table: OptionTable) -> str:
    """An option this release lacks: the releases that have it (or a close spelling) say which to
    run."""
    having = [r for s in versions.same_setting(exc.flag) for r in versions.releases_with(s)]
    if having:
        return (f"{exc.flag} does not exist in SGLang {table.version} (SGLang releases with it: "
                f"{versions.describe(having)})")
    hint = f" (did you mean {', '.join(exc.suggestions)}?)" if exc.suggestions else ""
    return f"unknown SGLang {table.version} option {exc.flag}{hint}"


def _semantic_problem(spec: OptionSpec, value: Any) -> str | None:
    if spec.name == "--speculative-algorithm" and isinstance(value, str) \
            and value.upper() not in SPECULATIVE_ALGORITHMS:
        # SGLang's argparse takes any string and fails at start-up ("Unknown speculative
        # algorithm name"): every configuration would be refused, one by one
        return (f"{value!r} is not a speculative algorithm SGLang knows (those of the releases "
                f"spectune knows: {', '.join(SPECULATIVE_ALGORITHMS)})")
    # aliases and renames alike
    spellings = [s for opt in spec.opts for s in versions.same_setting(opt)]
    bounds = next((SEMANTIC_BOUNDS[s] for s in spellings if s in SEMANTIC_BOUNDS), None)
    if bounds is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    low, high, inclusive = bounds
    if value > high or value < low or (value == low and not inclusive):
        lo_txt = f"{'≥' if inclusive else '>'} {low}"
        return f"{spec.name} must be {lo_txt} and ≤ {high}, not {value}"
    return None


def _value_problem(table: OptionTable, spec: OptionSpec, value: Any) -> str | None:
    """``table.check_value``, naming the releases that accept a choice this one lacks (``fa4``,
    ``trtllm_mha``)."""
    problem = table.check_value(spec, value)
    if problem is None or spec.choices is None or isinstance(value, list | dict | bool):
        return problem
    accepting = versions.releases_accepting(spec.name, str(value))
    if accepting and str(value) not in spec.choices:
        return (f"{spec.name} does not accept {value!r} in SGLang {table.version} (SGLang releases "
                f"that do: {versions.describe(accepting)})")
    return problem


def server(problems: Problems, section: ServerSection,
           table: OptionTable) -> tuple[dict[str, FlagValue],
                                      dict[str, str]]:
    """``[server]``: fixed flags by their canonical names, and the environment."""
    flags: dict[str, FlagValue] = {}
    for key, value in section.flags.items():
        where = f"server.flags.{key}"
        spec = _resolve_flag(problems, where, normalize_flag(key), table)
        if spec is None:
            continue
        if spec.name in flags:
            problems.add(where, f"{spec.name} is given twice (aliases name the same option)")
            continue
        problem = _not_finite(value) or _value_problem(table, spec,
                                                       value) or _semantic_problem(spec, value)
        if problem:
            problems.add(where, problem)
            continue
        flags[spec.name] = value
    env: dict[str, str] = {}
    for key, text in section.env.items():
        if not re.match(ENV_NAME_PATTERN, key):
            problems.add(f"server.env.{key}", "not a valid environment variable name")
        else:
            env[key] = text
    return flags, env


def _not_finite(value: Any) -> str | None:
    """TOML has nan and inf; no SGLang flag means anything by them."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, not {value!r}"
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next((p for p in map(_not_finite, items) if p), None)


# ----- [search] and [baseline] --------------------------------------------------------------------
def search(problems: Problems, data: dict[str, SearchParam], table: OptionTable,
           server_flags: dict[str, FlagValue]) -> tuple[ParamSpec, ...]:
    """``[search]``: the tuned flags, each a range on a grid or a list of choices."""
    if not data:
        problems.add("search", "is empty: name at least one flag to tune")
    params: dict[str, ParamSpec] = {}
    for key, value in data.items():
        where = f"search.{key}"
        spec = _resolve_flag(problems, where, normalize_flag(key), table)
        if spec is None:
            continue
        if spec.name in server_flags:
            problems.add(where, f"{spec.name} is both fixed in [server.flags] and tuned in "
                                "[search]; keep one")
            continue
        if spec.name in params:
            problems.add(where, f"{spec.name} is given twice (aliases name the same option)")
            continue
        param = _param(problems, where, spec, value, table)
        if param is not None:
            params[spec.name] = param
    return tuple(params.values())


def _param(problems: Problems, where: str, spec: OptionSpec, value: SearchParam,
           table: OptionTable) -> ParamSpec | None:
    if value.choices is not None:
        if any(v is not None for v in (value.min, value.max, value.step)):
            problems.add(where, "give either choices or min/max, not both")
            return None
        choices = value.choices
        if not choices:
            problems.add(f"{where}.choices", "is empty")
            return None
        ok = True
        for choice in choices:
            if spec.name == "--speculative-algorithm":
                problem = branches.choice_problem(choice)
                if (problem is None
                    and branches.branch_of(choice).kind is branches.BranchKind.ADAPTIVE
                        and table.by_option(branches.ADAPTIVE) is None):
                    problem = (f"{choice!r}: --speculative-adaptive does not exist in SGLang "
                               f"{table.version} (SGLang releases that have it: "
                               f"{versions.describe(versions.releases_with(branches.ADAPTIVE))})")
                if problem:
                    problems.add(f"{where}.choices", problem)
                    ok = False
                if branches.branch_of(choice).kind in (branches.BranchKind.OFF,
                                                       branches.BranchKind.ADAPTIVE):
                    continue
            problem = _not_finite(choice) or _value_problem(table,
                                                            spec, choice) or _semantic_problem(
                                                                spec, choice)
            if problem:
                problems.add(f"{where}.choices", problem)
                ok = False
        if len({repr(c) for c in choices}) != len(choices):
            problems.add(f"{where}.choices", "lists the same value twice")
            ok = False
        return ParamSpec(spec.name, spec.value_kind, choices=tuple(choices)) if ok else None

    if spec.value_kind not in ("int", "float"):
        problems.add(where,
                     f"{spec.name} takes {spec.value_kind} values: give choices, not a range")
        return None
    low, high, step = value.min, value.max, value.step
    for key, bound in (("min", low), ("max", high), ("step", step)):
        if bound is None and key != "step":
            problems.add(f"{where}.{key}", "missing (required)")
        elif spec.value_kind == "int" and bound is not None and not isinstance(bound, int):
            problems.add(f"{where}.{key}", f"must be an integer, not {bound!r}")
            return None
    if low is None or high is None:
        return None
    if spec.value_kind == "float" and step is None:
        problems.add(where,
                     "a float range needs a step (e.g. step = 0.01) so trials land on a grid")
        return None
    if step is not None and step <= 0:
        problems.add(f"{where}.step", f"must be > 0, not {step}")
        return None
    if low > high:
        problems.add(where, f"empty range: min {low} > max {high}")
        return None
    for bound in (low, high):
        problem = _semantic_problem(spec, bound)
        if problem:
            problems.add(where, f"impossible range: {problem}")
            return None
    step = step if step is not None else 1
    n = (high - low) / step
    if n + 1 > MAX_GRID_POINTS:
        problems.add(f"{where}.step",
                     f"step {step} makes {n + 1:.3g} grid points from {low} to {high} "
                     f"(at most {MAX_GRID_POINTS:,}); use a larger step")
        return None
    if abs(n - round(n)) > 1e-9:
        problems.add(where, f"max {high} is not on the grid min {low} + k·step {step}")
        return None
    return ParamSpec(spec.name, spec.value_kind, low=low, high=high, step=step)


def baseline(problems: Problems, data: dict[str, Any], table: OptionTable,
             search: tuple[ParamSpec, ...], *,
             named_in_search: Collection[str] = ()) -> dict[str, FlagValue]:
    """``[baseline]``: the server's current value of every tuned flag (``named_in_search``: every
    flag ``[search]`` names, normalised, those it refused among them)."""
    tuned = {p.flag: p for p in search}
    baseline: dict[str, FlagValue] = {}
    given: set[str] = set()  # every flag named, refused or not: not reported again as missing
    for key, value in data.items():
        where = f"baseline.{key}"
        spec = _resolve_flag(problems, where, normalize_flag(key), table)
        if spec is None:
            continue
        given.add(spec.name)
        param = tuned.get(spec.name)
        if param is None and (spec.name in named_in_search
                              or normalize_flag(key) in named_in_search):
            continue  # its [search] entry was refused already (under whatever spelling)
        if param is None:
            problems.add(where, f"{spec.name} is not tuned in [search]; fixed flags belong in "
                                "[server.flags]")
            continue
        if not (spec.name == "--speculative-algorithm" and branches.branch_of(value).kind in (
                branches.BranchKind.OFF, branches.BranchKind.ADAPTIVE)):
            problem = _not_finite(value) or _value_problem(table, spec, value)
            if problem:
                problems.add(where, problem)
                continue
        if param.choices is not None:
            if value not in param.choices:
                problems.add(where,
                             f"{value!r} is not among the search choices {list(param.choices)}")
                continue
        elif (param.low is not None and param.high is not None
              and not param.low <= value <= param.high):
            problems.add(where, f"{value} is outside the search range {param.low}..{param.high}")
            continue
        baseline[spec.name] = value
    algorithm = baseline.get("--speculative-algorithm", data.get("speculative-algorithm"))
    on_branch = [p for p in search if algorithm is None
                 or branches.applies(p.flag, branches.branch_of(algorithm))]
    missing = [p.flag for p in on_branch if p.flag not in given
               and p.flag not in _derived_when_topk1(baseline)]
    if baseline and missing:
        problems.add("baseline",
                     f"gives no value for {', '.join(missing)}: the baseline is the server's "
                     "current configuration and needs every tuned flag")
    return baseline


def _derived_when_topk1(baseline: dict[str, FlagValue]) -> tuple[str, ...]:
    """With topk=1 SGLang derives draft tokens from steps, so a baseline may leave them out."""
    return ("--speculative-num-draft-tokens",
            ) if baseline.get("--speculative-eagle-topk") == 1 else ()
