"""Plugging a landscape in: loading ``MODULE:FACTORY``, the study a landscape carries, and its truth
cached on disk.

Public (docs/benchmarks.md, "Evaluating the search on your own landscape"): ``load_landscape``,
``study_of``, ``make_objective``, ``landscape_fingerprint`` and ``cached_true_scores``.

* A landscape may carry its study: a ``study`` attribute (a ``StudySpec``, or a study file's path —
  relative to the file that defines the landscape), an ``objective`` (``ObjectiveSpec``: weights and
  constraints) and a ``baseline`` (flag → value) that replace the study's own. ``study_of`` resolves
  them; ``evaluate_search`` and the bench use it, so a search, its truth and its scoring agree.
* A file loaded by path is registered in ``sys.modules`` before it runs: ``@dataclass`` (and
  pickling) look their module up there, which ``from __future__ import annotations`` makes them do.
* The truth of a landscape measures every distinct configuration of its space once — minutes for a
  slow model — so ``cached_true_scores`` keeps it on disk, keyed by the study's content and
  ``landscape_fingerprint``: the landscape's declared ``version`` if it has one, else the source of
  every module it is made of and imports (outside the standard library and installed packages;
  spectune's own code by its version) and its true scores at a few fixed points of the study.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import json
import math
import os
import sys
import sysconfig
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import tuner
from tuner.core.errors import SpectuneError
from tuner.study.load import load_study_file
from tuner.study.objective import parse_constraint
from tuner.study.space import SearchSpace
from tuner.study.spec import ObjectiveSpec, StudySpec

#: Points of the space whose true scores are part of a landscape's fingerprint (besides the
#: baseline).
ANSWERS_SAMPLE = 8
#: Packages whose code is keyed by spectune's version rather than by their sources.
_PRODUCT = ("tuner", "objectives")


class LandscapeError(SpectuneError):
    """A landscape that cannot be loaded or names no usable study (one line: what and where)."""

    exit_code = 2


def load_landscape(text: str, *, base: Path | None = None) -> tuple[Callable[..., Any], ModuleType]:
    """``MODULE:FACTORY`` → (the factory, its module). MODULE is importable (``pkg.mod``) or a file
    path (``path/to/mod.py``, relative to ``base``, default the working directory)."""
    module_name, sep, factory_name = text.rpartition(":")
    if not sep or not module_name or not factory_name:
        raise LandscapeError(f"--landscape: expected MODULE:FACTORY, not {text!r}")
    if module_name.endswith(".py") or "/" in module_name:
        path = ((base or Path.cwd()) / module_name).resolve()
        if not path.is_file():
            raise LandscapeError(f"--landscape: no file {path}")
        module = _exec_file(path)
    else:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise LandscapeError(f"--landscape: cannot import {module_name}: {type(exc).__name__}: "
                                 f"{exc}") from None
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise LandscapeError(f"--landscape: {module_name} has no callable {factory_name!r}")
    return factory, module


def _exec_file(path: Path) -> ModuleType:
    # A name of its own per file (two landscapes may both be "model.py"), registered before it runs.
    name = f"spectune_landscape_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise LandscapeError(f"--landscape: cannot load {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    # the user's file: what is wrong in it, in one line (its line number included)
    except Exception as exc:
        del sys.modules[name]
        raise LandscapeError(f"--landscape: {path}: {type(exc).__name__}: {exc}") from None
    except BaseException:
        del sys.modules[name]
        raise
    return module


def home_of(landscape: object) -> Path:
    """The directory a landscape's relative study path is read from: its own ``home`` if it sets
    one, else the directory of the file that defines its class, else the working directory."""
    home = getattr(landscape, "home", None)
    if home is not None:
        return Path(home)
    module = sys.modules.get(type(landscape).__module__)
    file = getattr(module, "__file__", None)
    return Path(file).resolve().parent if file else Path.cwd()


def study_of(landscape: object, study: StudySpec | str | Path | None = None) -> StudySpec:
    """The study a search on ``landscape`` runs: ``study`` if given (a path relative to the working
    directory), else the landscape's own ``study``; then the landscape's ``objective`` and
    ``baseline``, where it declares them, replace the study's."""
    chosen = study if study is not None else getattr(landscape, "study", None)
    if chosen is None:
        raise LandscapeError(
            f"{type(landscape).__name__}: no study given and the landscape names none "
            f"(set its `study` attribute, or pass a study file)")
    if isinstance(chosen, str | Path):
        path = Path(chosen) if study is not None else home_of(landscape) / chosen
        chosen = load_study_file(path)
    if not isinstance(chosen, StudySpec):
        raise LandscapeError(
            f"{type(landscape).__name__}.study: a StudySpec or a study file path, not "
            f"{type(chosen).__name__}")
    return with_landscape_overrides(chosen, landscape)


def with_landscape_overrides(spec: StudySpec, landscape: object) -> StudySpec:
    """``spec`` with the landscape's ``objective`` and ``baseline``, where it declares them."""
    objective = getattr(landscape, "objective", None)
    if objective is not None:
        if not isinstance(objective, ObjectiveSpec):
            raise LandscapeError(f"{type(landscape).__name__}.objective: an ObjectiveSpec, not "
                                 f"{type(objective).__name__}")
        spec = replace(spec, objective=objective)
    baseline = getattr(landscape, "baseline", None)
    if baseline is not None:
        if not isinstance(baseline, Mapping):
            raise LandscapeError(
                f"{type(landscape).__name__}.baseline: flag → value, not {type(baseline).__name__}")
        searched = {p.flag for p in spec.search}
        unknown = sorted(set(baseline) - searched - set(spec.server_flags))
        if unknown:
            raise LandscapeError(
                f"{type(landscape).__name__}.baseline: {', '.join(unknown)} is not a flag of "
                f"the study {spec.path}")
        spec = replace(spec, baseline=dict(baseline))
    return spec


def make_objective(weights: Mapping[int, float], constraints: Sequence[str] = (), *,
                   concurrencies: Sequence[int] | None = None) -> ObjectiveSpec:
    """A landscape's own objective: phase weights by concurrency ({1: 0.7, 64: 0.3}) and constraints
    written as in a study file's ``[objective] constraints`` ("error_rate <= 0.01", "c64.ttft_p99_ms
    <= 8000"); ``concurrencies``: the benchmark's phases a constraint may name (default: the
    weighted ones)."""
    bad = [f"c{c}={w!r}" for c, w in weights.items()
           if not (isinstance(w, int | float) and math.isfinite(w)
                    and w >= 0)]
    if bad or not any(w > 0 for w in weights.values()):
        raise LandscapeError(
            f"objective weights: finite, ≥ 0 and one > 0, not {', '.join(bad) or dict(weights)}")
    phases = list(concurrencies) if concurrencies is not None else [int(c) for c in weights]
    try:
        parsed = tuple(parse_constraint(text, phases) for text in constraints)
    except ValueError as exc:
        raise LandscapeError(f"objective constraints: {exc}") from None
    return ObjectiveSpec({int(c): float(w) for c, w in weights.items()}, parsed)


def landscape_fingerprint(landscape: object, *extra: ModuleType, spec: StudySpec | None = None
                          ) -> str:
    """What the landscape's truth depends on besides its study: ``version:<declared>`` where the
    landscape declares a ``version``, else a digest of the sources of every module it is made of and
    (transitively) imports, outside the standard library and installed packages, with spectune's own
    code by its version — and, given the study, of its true scores at a few fixed points of the
    space: one module's two factories with other numbers (or numbers read from the environment) are
    the same sources and other truths."""
    declared = getattr(landscape, "version", None)
    if declared is not None:
        return f"version:{declared}"
    answers = f":answers:{_answers(landscape, spec)}" if spec is not None else ""
    roots = [type(landscape).__module__, *(m.__name__ for m in extra)]
    for value in vars(landscape).values() if hasattr(landscape, "__dict__") else ():
        roots += [getattr(value, "__module__", None) or "", type(value).__module__]
    digest = hashlib.sha256(f"spectune {tuner.__version__}".encode())
    for path in sorted(_source_files(roots)):
        digest.update(b"\0" + str(path).encode() + b"\0" + path.read_bytes())
    return f"sources:{digest.hexdigest()[:16]}{answers}"


def _answers(landscape: object, spec: StudySpec) -> str:
    """A digest of the landscape's true scores at the baseline and ``ANSWERS_SAMPLE`` fixed points
    of the study's space."""
    space = SearchSpace(spec, spec.option_table)
    true_score = getattr(landscape, "true_score", None)
    if not callable(true_score):
        return "none"
    configs = [proposal.config for _, proposal in space.distinct_valid(ANSWERS_SAMPLE, seed=0)]
    if spec.baseline:
        configs.insert(0, space.baseline().config)
    digest = hashlib.sha256()
    for config in configs:
        score = true_score(config) if config is not None else None
        digest.update(f"{score!r};".encode())
    return digest.hexdigest()[:16]


def _source_files(roots: Iterable[str]) -> set[Path]:
    """Source files of ``roots`` and of every module they reach through their globals (imports, and
    the modules of the functions and classes they import), leaving out the standard library and
    installed packages."""
    installed = {Path(sysconfig.get_paths()[k]).resolve()
                 for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    seen: set[str] = set()
    files: set[Path] = set()
    todo = [r for r in roots if r]
    while todo:
        name = todo.pop()
        if name in seen or name.split(".")[0] in _PRODUCT:
            continue
        seen.add(name)
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        if module is None or not file:
            continue
        path = Path(file).resolve()
        if any(path.is_relative_to(p) for p in installed) or not path.is_file():
            continue
        files.add(path)
        todo += _imported_names(path, module.__package__ or "")
        for value in vars(module).values():
            todo.append(value.__name__ if isinstance(value, ModuleType)
                        else getattr(value, "__module__", "") or "")
    return files


def _imported_names(path: Path, package: str) -> list[str]:
    """The modules ``path`` imports by name (``from helper import CONSTANT`` leaves no trace in its
    globals)."""
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}".strip(".")
            names += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return names


def cached_true_scores(compute: Callable[[], Mapping[str, float]], spec: StudySpec,
                       fingerprint: str, cache_dir: Path) -> dict[str, float]:
    """``compute()`` (config key → true score), kept in ``cache_dir`` per (study content,
    ``fingerprint``)."""
    study_bytes = spec.path.read_bytes() if spec.path.is_file() else b""
    overrides = repr((spec.objective, sorted(spec.baseline.items())))
    key = hashlib.sha256(b"\0".join([study_bytes, overrides.encode(),
                                     fingerprint.encode()])).hexdigest()[:16]
    cache = cache_dir / f"{key}.json"
    if cache.is_file():
        try:
            return {str(k): float(v) for k, v in json.loads(cache.read_text()).items()}
        except (ValueError, AttributeError):
            pass  # a damaged cache file: computed again and replaced
    truth = {str(k): float(v) for k, v in compute().items()}
    cache_dir.mkdir(parents=True, exist_ok=True)
    # one name per process: two bench runs computing the same truth must not replace each other's
    partial = cache.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(truth))
    partial.replace(cache)
    return truth
