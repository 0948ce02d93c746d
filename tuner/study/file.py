"""Load and validate a study file (TOML) as a whole.

Every problem becomes one line ``FILE: KEY: PROBLEM``; all of them are collected before anything is raised, so
a user fixes a broken file in one round. Nothing here touches a server or a database.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from pathlib import Path
from typing import Any, cast

from objectives.spec import BenchmarkSpec, PhaseSpec, WorkloadSpec
from tuner.core.durations import parse_duration
from tuner.core.errors import StudyFileError
from tuner.sglang.launch import FlagValue
from tuner.sglang.options import (
    DEFAULT_SGLANG_VERSION,
    AmbiguousOption,
    OptionSpec,
    OptionTable,
    UnknownOption,
    available_versions,
    load_option_table,
    normalize_flag,
)
from tuner.study.spec import (
    SPECULATION_OFF,
    ConstraintSpec,
    FinishAction,
    ObjectiveSpec,
    ParamSpec,
    SamplerName,
    StudySettings,
    StudySpec,
    TargetKind,
    TargetSpec,
)

SECTIONS = ("study", "target", "server", "search", "baseline", "benchmark", "objective", "finish")
SAMPLERS = ("auto", "gp", "tpe", "random")
TARGET_KINDS = ("simulated", "local", "systemd-ssh")
FINISH_ACTIONS = ("original", "best", "leave")
APIS = ("chat", "completions", "generate")
PRESETS = ("realistic", "seed")

#: Options whose old names became ambiguous in SGLang 0.5.20+; the fix we suggest.
RENAMED_OPTIONS = {
    "--cuda-graph-max-bs": "--cuda-graph-max-bs-decode",
    "--cuda-graph-bs": "--cuda-graph-bs-decode",
}
#: The target decides where the server listens; a study cannot override it per trial.
TARGET_OWNED_OPTIONS = ("--host", "--port")

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

_PHASE_METRICS = (
    "error_rate", "accept_length", "request_rate", "aggregate_tok_s", "per_request_tok_s_mean",
    "per_request_tok_s_median", "achieved_concurrency",
    *(f"{m}_{s}_ms" for m in ("ttft", "itl", "tpot", "e2e") for s in ("mean", "p50", "p90", "p99")),
)
CONSTRAINT_METRICS = _PHASE_METRICS
_CONSTRAINT_RE = re.compile(r"^\s*(?:c(\d+)\.)?([a-z0-9_]+)\s*(<=|>=|<|>)\s*([-+]?[0-9.]+(?:[eE][-+]?\d+)?)\s*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_WEIGHT_KEY_RE = re.compile(r"^c(\d+)$")


class Problems:
    """Collects ``FILE: KEY: PROBLEM`` lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []

    def add(self, key: str, problem: str) -> None:
        self.lines.append(f"{self.path}: {key}: {problem}")

    def __bool__(self) -> bool:
        return bool(self.lines)


def _did_you_mean(word: str, options: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else f" (expected one of: {', '.join(options)})"


class _Section:
    """Typed access to one TOML table, reporting unknown keys and wrong types as problems."""

    def __init__(self, problems: Problems, name: str, data: Any, allowed: tuple[str, ...]) -> None:
        self.problems = problems
        self.name = name
        self.data: dict[str, Any] = data if isinstance(data, dict) else {}
        if data is not None and not isinstance(data, dict):
            problems.add(name, f"must be a table, not {type(data).__name__}")
        for key in self.data:
            if key not in allowed:
                problems.add(f"{name}.{key}", "unknown key" + _did_you_mean(key, allowed))

    def key(self, key: str) -> str:
        return f"{self.name}.{key}"

    def get(self, key: str, kind: str, default: Any = None, *, required: bool = False) -> Any:
        if key not in self.data:
            if required:
                self.problems.add(self.key(key), "missing (required)")
            return default
        value = self.data[key]
        ok = {
            "str": isinstance(value, str),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, int | float) and not isinstance(value, bool),
            "bool": isinstance(value, bool),
            "table": isinstance(value, dict),
            "list": isinstance(value, list),
            "str-list": isinstance(value, list) and all(isinstance(v, str) for v in value),
            "duration": isinstance(value, str | int | float) and not isinstance(value, bool),
        }[kind]
        if not ok:
            wanted = {"str": "a string", "int": "an integer", "number": "a number", "bool": "true or false",
                      "table": "a table", "list": "a list", "str-list": "a list of strings",
                      "duration": "a duration such as \"30m\" or a number of seconds"}[kind]
            self.problems.add(self.key(key), f"must be {wanted}, not {value!r}")
            return default
        if kind == "duration":
            try:
                return parse_duration(value)
            except ValueError as exc:
                self.problems.add(self.key(key), str(exc))
                return default
        return value

    def positive(self, key: str, kind: str, default: Any, *, allow_zero: bool = False) -> Any:
        value = self.get(key, kind, default)
        if value is not None and value is not default and (value < 0 or (value == 0 and not allow_zero)):
            self.problems.add(self.key(key), f"must be {'≥ 0' if allow_zero else '> 0'}, not {value!r}")
            return default
        return value


def load_study_file(path: str | Path) -> StudySpec:
    """Read and validate ``path``; raise ``StudyFileError`` listing every problem."""
    path = Path(path)
    problems = Problems(path)
    if not path.exists():
        raise StudyFileError([f"{path}: file not found"])
    if not path.is_file():
        raise StudyFileError([f"{path}: not a file"])
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise StudyFileError([f"{path}: not a UTF-8 text file"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise StudyFileError([f"{path}: invalid TOML: {exc}"]) from None

    for name in raw:
        if name not in SECTIONS:
            problems.add(name, "unknown section" + _did_you_mean(name, SECTIONS))

    base_dir = path.parent
    study = _study_settings(problems, raw.get("study"), path)
    table = load_option_table(study.sglang_version)
    target = _target(problems, raw.get("target"), base_dir)
    server_flags, server_env = _server(problems, raw.get("server"), table)
    search = _search(problems, raw.get("search"), table, server_flags)
    baseline = _baseline(problems, raw.get("baseline"), table, search)
    benchmark = _benchmark(problems, raw.get("benchmark"), base_dir)
    objective = _objective(problems, raw.get("objective"), benchmark)
    finish = _finish(problems, raw.get("finish"))
    _speculative_completeness(problems, server_flags, search)

    if len(target.hosts) > 1 and study.storage.startswith("sqlite"):
        problems.add("target.hosts", f"{len(target.hosts)} hosts need a PostgreSQL or MySQL [study] storage "
                     "(SQLite serves one tuner at a time; see docs/scaling.md)")
    if problems:
        raise StudyFileError(problems.lines)
    spec = StudySpec(path=path, study=study, target=target, server_flags=server_flags, server_env=server_env,
                     search=search, baseline=baseline, benchmark=benchmark, objective=objective, finish=finish)
    _check_space_is_feasible(problems, spec, table)
    if problems:
        raise StudyFileError(problems.lines)
    return spec


# ----- [study] ---------------------------------------------------------------------------------------
def _study_settings(problems: Problems, data: Any, path: Path) -> StudySettings:
    if data is None:
        problems.add("study", "missing section (needs at least name)")
    s = _Section(problems, "study", data, ("name", "storage", "n_trials", "timeout", "sampler", "seed",
                                          "sglang_version", "heartbeat_interval", "heartbeat_grace"))
    name = s.get("name", "str", path.stem, required=data is not None)
    if isinstance(name, str) and not name.strip():
        problems.add("study.name", "must not be empty")
    storage = s.get("storage", "str", None)
    if storage is None:
        storage = f"sqlite:///{(path.parent / (path.stem + '.db')).resolve()}"
    else:
        storage = _resolve_storage(problems, storage, path.parent)
    sampler = s.get("sampler", "str", "auto")
    if sampler not in SAMPLERS:
        problems.add("study.sampler", f"unknown sampler {sampler!r}" + _did_you_mean(sampler, SAMPLERS))
        sampler = "auto"
    version = s.get("sglang_version", "str", DEFAULT_SGLANG_VERSION)
    if version not in available_versions():
        problems.add("study.sglang_version",
                     f"no option table for SGLang {version} (shipped: {', '.join(available_versions())})")
        version = DEFAULT_SGLANG_VERSION
    interval, grace = _heartbeat(s)
    return StudySettings(
        name=name,
        storage=storage,
        n_trials=s.positive("n_trials", "int", 20),
        timeout_s=s.positive("timeout", "duration", None),
        sampler=cast(SamplerName, sampler),
        seed=s.get("seed", "int", None),
        sglang_version=version,
        heartbeat_interval_s=interval,
        heartbeat_grace_s=grace,
    )


def _heartbeat(s: _Section) -> tuple[int, int]:
    """Whole seconds (Optuna's RDB heartbeat takes ints). The grace must cover a few missed beats, or a busy
    worker's live trial is failed as stale by another (optuna#4234, #5470)."""
    interval = s.positive("heartbeat_interval", "duration", 60.0)
    grace = s.positive("heartbeat_grace", "duration", None)
    interval_s = max(1, math.ceil(interval))
    grace_s = math.ceil(grace) if grace is not None else 5 * interval_s
    if grace_s < 2 * interval_s:
        s.problems.add(s.key("heartbeat_grace"), f"must be at least twice heartbeat_interval ({2 * interval_s} s), "
                       f"not {grace_s} s")
        grace_s = 2 * interval_s
    return interval_s, grace_s


def _resolve_storage(problems: Problems, storage: str, base_dir: Path) -> str:
    """Relative SQLite paths are relative to the study file, not to wherever spectune was started."""
    scheme, sep, rest = storage.partition("://")
    if not sep or not re.fullmatch(r"[a-z0-9+]+", scheme):
        problems.add("study.storage", f"not a database URL: {storage!r} (e.g. sqlite:///study.db, "
                     "postgresql://user@host/db)")
        return storage
    dialect = scheme.split("+")[0]
    if dialect not in ("sqlite", "postgresql", "mysql"):
        problems.add("study.storage", f"unsupported database {dialect!r} (use sqlite, postgresql or mysql)")
        return storage
    if dialect == "sqlite" and rest.startswith("/") and not rest.startswith("//") and rest != "/:memory:":
        db_path = Path(rest[1:])
        if not db_path.is_absolute():
            db_path = (base_dir / db_path).resolve()
        if not db_path.parent.is_dir():
            problems.add("study.storage", f"directory {db_path.parent} does not exist")
        return f"{scheme}:///{db_path}"
    return storage


# ----- [target] --------------------------------------------------------------------------------------
_TARGET_KEYS: dict[str, tuple[str, ...]] = {
    "simulated": ("kind", "profile", "time_scale", "seed", "port", "startup_timeout", "log_dir", "hosts"),
    "local": ("kind", "command", "host", "port", "startup_timeout", "log_dir", "stop_grace"),
    "systemd-ssh": ("kind", "host", "hosts", "ssh_port", "user", "key_file", "known_hosts", "accept_unknown_host_key",
                    "unit", "command", "server_port", "sudo", "startup_timeout", "connect_timeout",
                    "server_host", "listen_host", "systemd_dir"),
}


def _target(problems: Problems, data: Any, base_dir: Path) -> TargetSpec:
    if data is None:
        problems.add("target", "missing section (needs at least kind)")
        return TargetSpec(kind="simulated")
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind is None:
        problems.add("target.kind", f"missing (required; one of: {', '.join(TARGET_KINDS)})")
        _Section(problems, "target", data, tuple(sorted({k for ks in _TARGET_KEYS.values() for k in ks})))
        return TargetSpec(kind="simulated")
    if kind not in TARGET_KINDS:
        problems.add("target.kind", f"unknown target kind {kind!r}" + _did_you_mean(str(kind), TARGET_KINDS))
        return TargetSpec(kind="simulated")
    s = _Section(problems, "target", data, _TARGET_KEYS[kind])
    settings: dict[str, Any] = {}
    timeout = s.positive("startup_timeout", "duration", 900.0)
    hosts = _hosts(s)
    if kind == "simulated":
        settings["profile"] = _profile(problems, s.get("profile", "str", None), base_dir)
        settings["time_scale"] = s.positive("time_scale", "number", 1.0)
        settings["seed"] = s.get("seed", "int", 0)
        settings["port"] = _port(s, "port", 0, allow_zero=True)
        settings["log_dir"] = s.get("log_dir", "str", None)
    elif kind == "local":
        settings["command"] = _command(s, required=True)
        settings["host"] = s.get("host", "str", "127.0.0.1")
        settings["port"] = _port(s, "port", 30000)
        settings["log_dir"] = s.get("log_dir", "str", None)
        settings["stop_grace"] = s.positive("stop_grace", "duration", 30.0)
    else:
        settings["host"] = s.get("host", "str", None, required=not hosts)
        if hosts and settings["host"] is not None:
            problems.add("target.host", "set host or hosts, not both")
        settings["ssh_port"] = _port(s, "ssh_port", 22)
        settings["user"] = s.get("user", "str", "root")
        for key in ("key_file", "known_hosts"):
            settings[key] = _existing_file(problems, s, key, base_dir)
        settings["accept_unknown_host_key"] = s.get("accept_unknown_host_key", "bool", False)
        unit = s.get("unit", "str", None, required=True)
        if isinstance(unit, str) and not re.fullmatch(r"[A-Za-z0-9@_.\-:]+\.service", unit):
            problems.add("target.unit", f"not a systemd service name: {unit!r} (e.g. sglang.service)")
        settings["unit"] = unit
        settings["command"] = _command(s, required=True)
        settings["server_port"] = _port(s, "server_port", 30000)
        # Where the tuner connects (default: the SSH host) and what the server binds (its --host).
        settings["server_host"] = s.get("server_host", "str", None)
        settings["listen_host"] = s.get("listen_host", "str", "0.0.0.0")
        systemd_dir = s.get("systemd_dir", "str", "/etc/systemd/system")
        if isinstance(systemd_dir, str) and not systemd_dir.startswith("/"):
            problems.add("target.systemd_dir", f"must be an absolute path on the host: {systemd_dir!r}")
        settings["systemd_dir"] = systemd_dir
        settings["sudo"] = s.get("sudo", "bool", False)
        settings["connect_timeout"] = s.positive("connect_timeout", "duration", 15.0)
    if len(hosts) > 1:
        # Several hosts means several workers, each deploying to its own host: nothing may be shared.
        if kind == "simulated" and settings.get("port"):
            problems.add("target.port", "must be 0 with several hosts (each simulated host picks its own free port)")
        if kind == "systemd-ssh" and settings.get("server_host"):
            problems.add("target.server_host", "cannot be set with several hosts (each worker benchmarks its own)")
    return TargetSpec(kind=cast(TargetKind, kind), settings=settings, startup_timeout_s=timeout, hosts=hosts)


def _hosts(s: _Section) -> tuple[str, ...]:
    """``hosts = ["gpu1", "gpu2"]``: machines one study uses at once, one worker each (docs/scaling.md)."""
    hosts = s.get("hosts", "str-list", [])
    if "hosts" in s.data and isinstance(s.data["hosts"], list) and not hosts:
        s.problems.add(s.key("hosts"), "must not be empty (leave it out for one host)")
    seen: set[str] = set()
    for host in hosts:
        if not host.strip() or any(c.isspace() or c in "/\\" for c in host):
            s.problems.add(s.key("hosts"), f"not a host name: {host!r}")
        elif host in seen:
            s.problems.add(s.key("hosts"), f"{host!r} is listed twice (one worker per host)")
        seen.add(host)
    return tuple(hosts)


def _port(s: _Section, key: str, default: int, *, allow_zero: bool = False) -> int:
    value = s.get(key, "int", default)
    if not (0 if allow_zero else 1) <= value <= 65535:
        s.problems.add(s.key(key), f"not a TCP port: {value}")
        return default
    return cast(int, value)


def _command(s: _Section, *, required: bool) -> list[str]:
    command = s.get("command", "str-list", [], required=required)
    if "command" in s.data and isinstance(command, list) and not command:
        s.problems.add(s.key("command"), "must not be empty (e.g. [\"python3\", \"-m\", \"sglang.launch_server\"])")
    return cast(list[str], command)


def _existing_file(problems: Problems, s: _Section, key: str, base_dir: Path) -> str | None:
    value = s.get(key, "str", None)
    if value is None:
        return None
    resolved = (base_dir / Path(value).expanduser()).resolve()
    if not resolved.is_file():
        problems.add(s.key(key), f"file not found: {resolved}")
    return str(resolved)


def _profile(problems: Problems, value: str | None, base_dir: Path) -> str | None:
    """A shipped profile name, or a path to a profile TOML file (relative to the study file)."""
    if value is None:
        return None
    if "/" in value or value.endswith(".toml"):
        resolved = (base_dir / Path(value).expanduser()).resolve()
        if not resolved.is_file():
            problems.add("target.profile", f"file not found: {resolved}")
        return str(resolved)
    shipped = shipped_profiles()
    if shipped and value not in shipped:
        problems.add("target.profile", f"unknown simulator profile {value!r}" + _did_you_mean(value, shipped))
    return value


def shipped_profiles() -> list[str]:
    from importlib import resources

    try:
        folder = resources.files("tuner.simulator").joinpath("profiles")
    except ModuleNotFoundError:
        return []
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


# ----- [server] --------------------------------------------------------------------------------------
def _resolve_flag(problems: Problems, key: str, flag: str, table: OptionTable) -> OptionSpec | None:
    """The option a study-file key names; unknown, ambiguous and abbreviated names are problems."""
    try:
        spec = table.lookup(flag)
    except AmbiguousOption as exc:
        hint = RENAMED_OPTIONS.get(exc.flag)
        fix = f"use {hint}" if hint else f"use the full name: one of {', '.join(exc.matches)}"
        problems.add(key, f"ambiguous SGLang {table.version} option {exc.flag} (could match "
                     f"{', '.join(exc.matches)}); {fix}")
        return None
    except UnknownOption as exc:
        prefixed = [o for o in exc.suggestions if o.startswith(exc.flag)]
        if prefixed:
            problems.add(key, f"{exc.flag} is an abbreviation; write the full option name {prefixed[0]}")
        else:
            hint = f" (did you mean {', '.join(exc.suggestions)}?)" if exc.suggestions else ""
            problems.add(key, f"unknown SGLang {table.version} option {exc.flag}{hint}")
        return None
    if spec.name in TARGET_OWNED_OPTIONS:
        problems.add(key, f"{spec.name} is set by the target; use [target] "
                     f"{'port' if spec.name == '--port' else 'settings'} instead")
        return None
    return spec


def _semantic_problem(spec: OptionSpec, value: Any) -> str | None:
    bounds = SEMANTIC_BOUNDS.get(spec.name)
    if bounds is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    low, high, inclusive = bounds
    if value > high or value < low or (value == low and not inclusive):
        lo_txt = f"{'≥' if inclusive else '>'} {low}"
        return f"{spec.name} must be {lo_txt} and ≤ {high}, not {value}"
    return None


def _server(problems: Problems, data: Any, table: OptionTable) -> tuple[dict[str, FlagValue], dict[str, str]]:
    s = _Section(problems, "server", data, ("flags", "env"))
    flags: dict[str, FlagValue] = {}
    raw_flags = s.get("flags", "table", {})
    for key, value in raw_flags.items():
        where = f"server.flags.{key}"
        spec = _resolve_flag(problems, where, normalize_flag(key), table)
        if spec is None:
            continue
        if spec.name in flags:
            problems.add(where, f"{spec.name} is given twice (aliases name the same option)")
            continue
        problem = table.check_value(spec, value) or _semantic_problem(spec, value)
        if problem:
            problems.add(where, problem)
            continue
        flags[spec.name] = value
    env: dict[str, str] = {}
    for key, value in s.get("env", "table", {}).items():
        if not _ENV_NAME_RE.match(key):
            problems.add(f"server.env.{key}", "not a valid environment variable name")
        elif isinstance(value, bool) or not isinstance(value, str | int | float):
            problems.add(f"server.env.{key}", f"must be a string or number, not {value!r}")
        else:
            env[key] = str(value)
    return flags, env


# ----- [search] and [baseline] -----------------------------------------------------------------------
def _search(problems: Problems, data: Any, table: OptionTable,
            server_flags: dict[str, FlagValue]) -> tuple[ParamSpec, ...]:
    if data is None:
        problems.add("search", "missing section: name at least one flag to tune")
        return ()
    if not isinstance(data, dict):
        problems.add("search", f"must be a table, not {type(data).__name__}")
        return ()
    if not data:
        problems.add("search", "is empty: name at least one flag to tune")
    params: dict[str, ParamSpec] = {}
    for key, value in data.items():
        where = f"search.{key}"
        spec = _resolve_flag(problems, where, normalize_flag(key), table)
        if spec is None:
            continue
        if spec.name in server_flags:
            problems.add(where, f"{spec.name} is both fixed in [server.flags] and tuned in [search]; keep one")
            continue
        if spec.name in params:
            problems.add(where, f"{spec.name} is given twice (aliases name the same option)")
            continue
        param = _param(problems, where, spec, value, table)
        if param is not None:
            params[spec.name] = param
    return tuple(params.values())


def _param(problems: Problems, where: str, spec: OptionSpec, value: Any, table: OptionTable) -> ParamSpec | None:
    if not isinstance(value, dict):
        problems.add(where, "must be a table such as { min = 1, max = 8 } or { choices = [1, 2, 4] }")
        return None
    s = _Section(problems, where, value, ("min", "max", "step", "choices"))
    if "choices" in value:
        if any(k in value for k in ("min", "max", "step")):
            problems.add(where, "give either choices or min/max, not both")
            return None
        choices = s.get("choices", "list", None)
        if choices is None:
            return None
        if not choices:
            problems.add(f"{where}.choices", "is empty")
            return None
        ok = True
        for choice in choices:
            if spec.name == "--speculative-algorithm" and choice == SPECULATION_OFF:
                continue
            problem = table.check_value(spec, choice) or _semantic_problem(spec, choice)
            if problem:
                problems.add(f"{where}.choices", problem)
                ok = False
        if len({repr(c) for c in choices}) != len(choices):
            problems.add(f"{where}.choices", "lists the same value twice")
            ok = False
        return ParamSpec(spec.name, spec.value_kind, choices=tuple(choices)) if ok else None

    if spec.value_kind not in ("int", "float"):
        problems.add(where, f"{spec.name} takes {spec.value_kind} values: give choices, not a range")
        return None
    number = "int" if spec.value_kind == "int" else "number"
    low = s.get("min", number, None, required=True)
    high = s.get("max", number, None, required=True)
    step = s.get("step", number, None)
    if low is None or high is None:
        return None
    if spec.value_kind == "float" and step is None:
        problems.add(where, "a float range needs a step (e.g. step = 0.01) so trials land on a grid")
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
    if abs(n - round(n)) > 1e-9:
        problems.add(where, f"max {high} is not on the grid min {low} + k·step {step}")
        return None
    return ParamSpec(spec.name, spec.value_kind, low=low, high=high, step=step)


def _baseline(problems: Problems, data: Any, table: OptionTable,
              search: tuple[ParamSpec, ...]) -> dict[str, FlagValue]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.add("baseline", f"must be a table, not {type(data).__name__}")
        return {}
    tuned = {p.flag: p for p in search}
    baseline: dict[str, FlagValue] = {}
    for key, value in data.items():
        where = f"baseline.{key}"
        spec = _resolve_flag(problems, where, normalize_flag(key), table)
        if spec is None:
            continue
        param = tuned.get(spec.name)
        if param is None:
            problems.add(where, f"{spec.name} is not tuned in [search]; fixed flags belong in [server.flags]")
            continue
        if not (spec.name == "--speculative-algorithm" and value == SPECULATION_OFF):
            problem = table.check_value(spec, value)
            if problem:
                problems.add(where, problem)
                continue
        if param.choices is not None:
            if value not in param.choices:
                problems.add(where, f"{value!r} is not among the search choices {list(param.choices)}")
                continue
        elif param.low is not None and param.high is not None and not param.low <= value <= param.high:
            problems.add(where, f"{value} is outside the search range {param.low}..{param.high}")
            continue
        baseline[spec.name] = value
    missing = [p.flag for p in search if p.flag not in baseline and p.flag not in _derived_when_topk1(baseline)]
    if baseline and missing:
        problems.add("baseline", f"gives no value for {', '.join(missing)}: the baseline is the server's "
                     "current configuration and needs every tuned flag")
    return baseline


def _derived_when_topk1(baseline: dict[str, FlagValue]) -> tuple[str, ...]:
    """With topk=1 SGLang derives draft tokens from steps, so a baseline may leave them out."""
    return ("--speculative-num-draft-tokens",) if baseline.get("--speculative-eagle-topk") == 1 else ()


def _speculative_completeness(problems: Problems, flags: dict[str, FlagValue],
                              search: tuple[ParamSpec, ...]) -> None:
    """SGLang's all-three-or-none rule, checked on the study as a whole (fixed or tuned)."""
    present = set(flags) | {p.flag for p in search}
    tree = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
    if "--speculative-algorithm" not in present:
        stray = [f for f in present if f.startswith("--speculative-")]
        if stray:
            problems.add("server.flags", f"{', '.join(sorted(stray))} set without --speculative-algorithm")
        return
    if "--speculative-num-steps" not in present and any(f in present for f in tree[1:]):
        problems.add("search", "--speculative-num-steps must be set (fixed or tuned) whenever topk or draft "
                     "tokens are: SGLang fails with a bare AssertionError otherwise")
    topk_values = _possible_values(flags, search, "--speculative-eagle-topk")
    if any(v != 1 for v in topk_values) and "--speculative-num-draft-tokens" not in present:
        problems.add("search", "--speculative-num-draft-tokens must be set (fixed or tuned) when "
                     "--speculative-eagle-topk can exceed 1")


def _possible_values(flags: dict[str, FlagValue], search: tuple[ParamSpec, ...], flag: str) -> list[Any]:
    if flag in flags:
        return [flags[flag]]
    for p in search:
        if p.flag == flag:
            if p.choices is not None:
                return list(p.choices)
            return [p.low, p.high]
    return []


# ----- [benchmark] -----------------------------------------------------------------------------------
def _benchmark(problems: Problems, data: Any, base_dir: Path) -> BenchmarkSpec:
    s = _Section(problems, "benchmark", data, ("preset", "api", "dataset", "input_tokens", "max_tokens",
                                               "temperature", "ignore_eos", "model", "seed",
                                               "request_timeout", "connect_timeout", "phases"))
    preset = s.get("preset", "str", "realistic")
    if preset not in PRESETS:
        problems.add("benchmark.preset", f"unknown preset {preset!r}" + _did_you_mean(preset, PRESETS))
    seeded = preset == "seed"  # the seed campaign: greedy decoding, generation past EOS
    api = s.get("api", "str", "chat")
    if api not in APIS:
        problems.add("benchmark.api", f"unknown API {api!r}" + _did_you_mean(api, APIS))
        api = "chat"
    dataset = s.get("dataset", "str", "builtin")
    if dataset not in ("builtin", "synthetic"):
        resolved = (base_dir / Path(dataset).expanduser()).resolve()
        if not resolved.is_file():
            problems.add("benchmark.dataset", f"prompt file not found: {resolved}")
        dataset = str(resolved)
    temperature = s.get("temperature", "number", 0.0 if seeded else WorkloadSpec.temperature)
    if temperature < 0:
        problems.add("benchmark.temperature", f"must be ≥ 0, not {temperature}")
    workload = WorkloadSpec(
        api=api,
        dataset=dataset,
        input_tokens=s.positive("input_tokens", "int", WorkloadSpec.input_tokens),
        max_tokens=s.positive("max_tokens", "int", WorkloadSpec.max_tokens),
        temperature=float(temperature),
        ignore_eos=s.get("ignore_eos", "bool", True if seeded else WorkloadSpec.ignore_eos),
        model=s.get("model", "str", None),
        seed=s.get("seed", "int", 0),
        request_timeout_s=s.positive("request_timeout", "duration", WorkloadSpec.request_timeout_s),
        connect_timeout_s=s.positive("connect_timeout", "duration", WorkloadSpec.connect_timeout_s),
    )
    phases_raw = s.get("phases", "list", None)
    if phases_raw is None:
        return BenchmarkSpec(workload=workload)
    if not phases_raw:
        problems.add("benchmark.phases", "is empty: give at least one phase, e.g. { concurrency = 1, requests = 8 }")
        return BenchmarkSpec(workload=workload)
    phases: list[PhaseSpec] = []
    for i, item in enumerate(phases_raw):
        phase = _phase(problems, f"benchmark.phases[{i}]", item)
        if phase is not None:
            if any(p.concurrency == phase.concurrency for p in phases):
                problems.add(f"benchmark.phases[{i}].concurrency",
                             f"concurrency {phase.concurrency} appears in two phases")
            phases.append(phase)
    return BenchmarkSpec(workload=workload, phases=tuple(phases) or BenchmarkSpec().phases)


def _phase(problems: Problems, where: str, item: Any) -> PhaseSpec | None:
    if not isinstance(item, dict):
        problems.add(where, "must be a table such as { concurrency = 64, requests = 256 }")
        return None
    s = _Section(problems, where, item, ("concurrency", "requests", "duration", "warmup", "ci_target",
                                         "deadline"))
    concurrency = s.get("concurrency", "int", None, required=True)
    if concurrency is not None and concurrency < 1:
        problems.add(f"{where}.concurrency", f"must be ≥ 1, not {concurrency}")
        return None
    requests = s.positive("requests", "int", None)
    duration = s.positive("duration", "duration", None)
    if concurrency is None:
        return None
    if requests is None and duration is None:
        requests = 8 if concurrency == 1 else 4 * concurrency
    ci = s.get("ci_target", "number", None)
    if ci is not None and not 0 < ci < 1:
        problems.add(f"{where}.ci_target", f"must be a fraction between 0 and 1 (e.g. 0.02), not {ci}")
        ci = None
    return PhaseSpec(concurrency=concurrency, requests=requests, duration_s=duration,
                     warmup=s.positive("warmup", "int", 1, allow_zero=True), ci_target=ci,
                     deadline_s=s.positive("deadline", "duration", 1800.0))


# ----- [objective] and [finish] ----------------------------------------------------------------------
def _objective(problems: Problems, data: Any, benchmark: BenchmarkSpec) -> ObjectiveSpec:
    s = _Section(problems, "objective", data, ("weights", "constraints", "mode"))
    concurrencies = sorted(p.concurrency for p in benchmark.phases)
    default_weights = {c: 1.0 / len(concurrencies) for c in concurrencies}
    raw_weights = s.get("weights", "table", None)
    weights: dict[int, float] = {}
    if raw_weights is None:
        weights = default_weights
    else:
        for key, value in raw_weights.items():
            where = f"objective.weights.{key}"
            m = _WEIGHT_KEY_RE.match(key)
            if not m:
                problems.add(where, "weights are keyed by phase, e.g. c1 = 0.5, c64 = 0.5")
                continue
            if int(m.group(1)) not in concurrencies:
                problems.add(where, f"no benchmark phase with concurrency {m.group(1)} "
                             f"(phases: {', '.join(f'c{c}' for c in concurrencies)})")
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                problems.add(where, f"must be a number ≥ 0, not {value!r}")
                continue
            weights[int(m.group(1))] = float(value)
        if raw_weights and weights and not any(weights.values()):
            problems.add("objective.weights", "all weights are zero; at least one must be positive")
    constraints: list[ConstraintSpec] = []
    for i, text in enumerate(s.get("constraints", "str-list", [])):
        constraint = _constraint(problems, f"objective.constraints[{i}]", text, concurrencies)
        if constraint is not None:
            constraints.append(constraint)
    mode = s.get("mode", "str", "weighted")
    if mode not in ("weighted", "pareto"):
        problems.add("objective.mode", f"unknown mode {mode!r}" + _did_you_mean(mode, ("weighted", "pareto")))
        mode = "weighted"
    if mode == "pareto" and len([w for w in weights.values() if w > 0]) != 2:
        problems.add("objective.mode", "pareto mode needs exactly two weighted phases (e.g. c1 and c64)")
    return ObjectiveSpec(weights=weights or default_weights, constraints=tuple(constraints),
                         mode=cast(Any, mode))


def _constraint(problems: Problems, where: str, text: str, concurrencies: list[int]) -> ConstraintSpec | None:
    m = _CONSTRAINT_RE.match(text)
    if not m:
        problems.add(where, f"cannot read {text!r}; write METRIC OP NUMBER, e.g. 'ttft_p99_ms < 2000' or "
                     "'c64.error_rate <= 0.01'")
        return None
    phase, metric, op, bound = m.groups()
    if metric not in CONSTRAINT_METRICS:
        problems.add(where, f"unknown metric {metric!r}" + _did_you_mean(metric, CONSTRAINT_METRICS))
        return None
    if phase is not None and int(phase) not in concurrencies:
        problems.add(where, f"no benchmark phase with concurrency {phase}")
        return None
    return ConstraintSpec(text=text.strip(), metric=metric, op=cast(Any, op), bound=float(bound),
                          phase=int(phase) if phase is not None else None)


def _finish(problems: Problems, data: Any) -> FinishAction:
    s = _Section(problems, "finish", data, ("deploy",))
    action = s.get("deploy", "str", "original")
    if action not in FINISH_ACTIONS:
        problems.add("finish.deploy", f"unknown action {action!r}" + _did_you_mean(action, FINISH_ACTIONS))
        return "original"
    return cast(FinishAction, action)


def _check_space_is_feasible(problems: Problems, spec: StudySpec, table: OptionTable) -> None:
    from tuner.study.space import SearchSpace

    space = SearchSpace(spec, table)
    summary = space.enumerate(limit=50_000)
    if summary.complete and summary.valid == 0:
        reasons = "; ".join(f"{reason} ({n}×)" for reason, n in summary.top_rejections(3))
        problems.add("search", f"no valid configuration in the search space: {reasons}")
    if spec.baseline:
        proposal = space.decode(space.encode(spec.baseline))
        if proposal.rejected:
            problems.add("baseline", f"the baseline configuration is invalid: {proposal.reason}")



class _Collect(Problems):
    """Problems without the file/key prefix, for text that did not come from a study file."""

    def add(self, key: str, problem: str) -> None:
        self.lines.append(problem)


def parse_constraint(text: str, concurrencies: list[int]) -> ConstraintSpec:
    """One constraint written as in ``[objective] constraints`` (``spectune best --constraint``);
    ``ValueError`` naming the problem otherwise."""
    problems = _Collect(Path("-"))
    constraint = _constraint(problems, "", text, concurrencies)
    if constraint is None:
        raise ValueError(problems.lines[0])
    return constraint
