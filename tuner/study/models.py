"""The study file's format: one pydantic model per table, the single source of every key, type,
default, range and choice (the JSON Schema, docs/study-file.md and the loader all read these).

What a model cannot say — SGLang option lookups, the search space's feasibility, phase names in
weights — is checked by ``tuner.study.flags`` and ``tuner.study.objective`` on the validated values.
Each model converts into the frozen values of ``tuner.study.spec`` / ``objectives.spec`` that the
rest of spectune reads.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from objectives.prompts import WorkloadError, parse_jsonl
from objectives.spec import Api, BenchmarkSpec, PhaseSpec, WorkloadSpec
from tuner.core.extras import gp_available
from tuner.core.fields import FileModel, Number, PositiveDuration, base_dir, resolve_path
from tuner.sglang import versions
from tuner.study.checks import CheckSection
from tuner.study.spec import FinishAction, SamplerName, StudySettings
from tuner.study.storage_url import expand_env, resolve_storage
from tuner.study.values import (
    ENV_NAME_PATTERN,
    MAX_COUNT,
    EnvValue,
    FlagValueField,
    PositiveInt,
    Seed,
    Weight,
)
from tuner.targets.registry import TARGETS
from tuner.targets.settings import TargetSettings

MetricMode = Literal["weighted", "pareto"]
Preset = Literal["realistic", "seed"]


def choices_of(literal: Any) -> tuple[str, ...]:
    """The values of a ``Literal`` type, e.g. the samplers of ``SamplerName``."""
    return tuple(str(v) for v in typing.get_args(literal))


# ----- [study] ------------------------------------------------------------------------------------
class StudySection(FileModel):
    """``[study]``: what the study is called, where it is stored, and how long it runs."""

    name: str = Field(description="The study's name in its storage; also names its log folder.")
    storage: str | None = Field(None, description=(
        "An Optuna RDB URL: sqlite:///path (relative to the study file) or "
        "postgresql+psycopg://user@host/db (several workers, docs/scaling.md). ${NAME} is replaced "
        "by the environment variable NAME, so a password need not live in the file: "
        "\"${SPECTUNE_STORAGE}\" (the whole URL) or "
        "\"postgresql+psycopg://tuner:${DB_PASSWORD}@db/spectune\"; an unset variable is an error. "
        "Default: a SQLite file beside the study file, named after it."),
        json_schema_extra={
            "pattern": r"^(\$\{[A-Za-z_][A-Za-z0-9_]*\}|(sqlite|postgresql|postgresql\+psycopg)://)"})
    # A bound so an overflowing value is a one-line error, not a study that never ends (a trial
    # costs minutes).
    n_trials: PositiveInt = Field(20, le=100_000,
                                  description="How many trials that use the server to run.")
    timeout: PositiveDuration | None = Field(None, description=(
        "Stop starting new trials after this long (e.g. \"8h\"); default: no limit."))
    sampler: SamplerName = Field("auto", description=(
        "Optuna sampler: auto (the grey-box sampler: models of accept length, speed and "
        "feasibility; no PyTorch), greybox, tpe, random or gp (needs PyTorch)."))
    seed: Seed | None = Field(
        None, description="The sampler's seed, for a reproducible sequence of trials.")
    sglang_version: str | None = Field(None, description=(
        "The SGLang release the study is written for (e.g. \"0.5.20\"). Optional: the target's own "
        "SGLang supplies the option table at preflight; this release's table (or the nearest "
        "shipped one) checks flag names and values before then (`spectune validate`). A target "
        "running another release gets one line saying so, and a refusal only for a flag or value "
        "that release lacks. The shipped tables: docs/sglang-fidelity.md."),
        json_schema_extra={"pattern": r"^\d+(\.\d+)*([.-]?(a|b|rc|post|dev)\d*)*(\+[\w.]+)?$"})
    compare: list[Literal["adaptive", "off"]] = Field(["adaptive", "off"], description=(
        "What every study with an EAGLE-family draft also measures once, to say how the tuned "
        "winner compares: SGLang's adaptive steps (--speculative-adaptive) and no speculation; [] "
        "measures neither."))
    heartbeat_interval: PositiveDuration = Field(StudySettings.heartbeat_interval_s, description=(
        "How often a worker on a server database beats (rounded up to whole seconds)."))
    heartbeat_grace: PositiveDuration | None = Field(None, description=(
        "A worker silent this long is dead: its trial is re-run and its host lease can be taken "
        "over. Default: 5 × heartbeat_interval; at least 2 ×."))

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        if any(part in value for part in ("/", "\\", "..")):
            # The name becomes a folder (.spectune/<name>/logs) and a marker in unit files.
            raise ValueError(f"must not contain '/', '\\' or '..': {value!r}")
        return value

    @field_validator("storage")
    @classmethod
    def _storage(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        expanded = expand_env(value)
        # What error messages quote: the URL as written, never a password a variable supplied.
        return resolve_storage(expanded, base_dir(info), shown=value)

    @field_validator("sglang_version")
    @classmethod
    def _known_release(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            key = versions.release_key(value)
        except LookupError as exc:
            raise ValueError(str(exc)) from None
        oldest = versions.shipped()[0]
        if key < versions.release_key(oldest):
            raise ValueError(
                f"no option table for SGLang {value}: spectune knows SGLang {oldest} and newer "
                f"(shipped tables: {versions.describe(versions.shipped())})")
        return value

    @field_validator("sampler")
    @classmethod
    def _sampler_installed(cls, value: str) -> str:
        # Found here, not when the tuner first asks for a proposal after opening the study.
        if value == "gp" and not gp_available():
            raise ValueError(
                "'gp' needs PyTorch and SciPy: pip install 'spectune[gp]' (or use 'tpe' or 'auto')")
        return value

    @field_validator("heartbeat_grace")
    @classmethod
    def _grace_covers_beats(cls, value: float | None, info: ValidationInfo) -> float | None:
        # The grace must cover a few missed beats, or a busy worker's live trial is failed as stale
        # by another (optuna#4234, #5470).
        interval = info.data.get("heartbeat_interval")
        if value is not None and interval is not None and math.ceil(value) < 2 * _whole_seconds(
            interval):
            raise ValueError(
                f"must be at least twice heartbeat_interval ({2 * _whole_seconds(interval)} s), "
                f"not {math.ceil(value)} s")
        return value

    def to_settings(self, path: Path) -> StudySettings:
        storage = self.storage or f"sqlite:///{(path.parent / (path.stem + '.db')).resolve()}"
        interval = _whole_seconds(self.heartbeat_interval)
        grace = (math.ceil(self.heartbeat_grace) if self.heartbeat_grace is not None
                 else 5 * interval)
        return StudySettings(name=self.name, storage=storage, n_trials=self.n_trials,
                             timeout_s=self.timeout, sampler=self.sampler, seed=self.seed,
                             sglang_version=self.sglang_version,
                             heartbeat_interval_s=interval, heartbeat_grace_s=grace,
                             compare=tuple(dict.fromkeys(self.compare)))


def _whole_seconds(seconds: float) -> int:
    """Optuna's RDB heartbeat takes whole seconds."""
    return max(1, math.ceil(seconds))


# ----- [server], [search], [baseline] -------------------------------------------------------------
class ServerSection(FileModel):
    """``[server]``: what every trial's server gets besides the tuned flags."""

    flags: dict[str, FlagValueField] = Field(default_factory=dict, description=(
        "Fixed SGLang flags, named without the leading -- (e.g. model-path = \"Qwen/...\", tp-size "
        "= 4); checked against the target SGLang's option table (offline: the shipped table of "
        "sglang_version)."))
    env: dict[str, EnvValue] = Field(default_factory=dict,
                                     description="Environment variables of the server.",
                                     json_schema_extra={
                                         "propertyNames": {"pattern": ENV_NAME_PATTERN}})
    model_architecture: str | None = Field(None, description=(
        "The model's architecture, architectures[0] of its config.json (e.g. "
        "\"LlamaForCausalLM\"): SGLang picks the draft tree of a bare --speculative-algorithm from "
        "it. Default: the simulator's profile, else unknown — that choice is left to SGLang and "
        "recorded as unknown."))


class SearchParam(FileModel):
    """One tuned flag: a numeric range (``min``, ``max``, optional ``step``) or a list of ``choices``."""  # noqa: E501 - verbatim in the JSON Schema

    min: Number | None = Field(None, description="Lowest value of a numeric range (inclusive).")
    max: Number | None = Field(
        None, description="Highest value of a numeric range (inclusive, on the grid).")
    step: Number | None = Field(None, description=(
        "Grid spacing of a range: 1 for integer flags unless given; required for float flags."))
    choices: list[FlagValueField] | None = Field(None, description=(
        "The values to try, instead of a range. speculative-algorithm's choices are branches "
        "(docs/study.md, 'The kind of speculation'): an algorithm, \"ALGO-adaptive\" (SGLang's "
        "adaptive steps) or \"off\"; every other flag is then proposed only on the branches it "
        "applies to."))


# ----- [benchmark] --------------------------------------------------------------------------------
class PhaseSection(FileModel):
    """One closed-loop phase of ``[benchmark] phases``: ``concurrency`` requests in flight at all times."""  # noqa: E501 - verbatim in the JSON Schema

    # Bounded: each request in flight is a task and a connection; 10^8 of them exhaust memory, not
    # the server.
    concurrency: int = Field(
        ge=1, le=65536, description="Requests kept in flight (also names the phase: c1, c64 ...).")
    # Counts are bounded like max_tokens: an overflowing value is a one-line error, not a phase that
    # never ends.
    requests: PositiveInt | None = Field(None, le=MAX_COUNT, description=(
        "Measured requests (default without duration: 8 at concurrency 1, else 4 × concurrency)."))
    duration: PositiveDuration | None = Field(None, description=(
        "Measure for this long instead of (or besides) a request count; the first reached ends the "
        "phase."))
    warmup: int = Field(PhaseSpec.warmup, ge=0, le=MAX_COUNT,
                        description="Unmeasured requests sent first.")
    ci_target: float | None = Field(None, gt=0, lt=1, description=(
        "Stop early once the throughput's 95 % confidence interval is within ± this fraction (e.g. "
        "0.02)."))
    deadline: PositiveDuration = Field(PhaseSpec.deadline_s, description=(
        "The most one phase may take, however the server behaves."))

    def to_spec(self) -> PhaseSpec:
        requests = self.requests
        if requests is None and self.duration is None:
            requests = 8 if self.concurrency == 1 else 4 * self.concurrency
        return PhaseSpec(concurrency=self.concurrency, requests=requests, duration_s=self.duration,
                         warmup=self.warmup, ci_target=self.ci_target, deadline_s=self.deadline)


class BenchmarkSection(FileModel):
    """``[benchmark]``: the requests every trial sends, phase by phase."""

    preset: Preset = Field("realistic", description=(
        "realistic (sampling at temperature 0.7, stop at EOS) or seed (the seed campaign: greedy "
        "decoding, generation past EOS) — the defaults of temperature and ignore_eos."))
    api: Api = Field(WorkloadSpec.api, description="Which HTTP API the requests use.")
    dataset: str = Field(WorkloadSpec.dataset, description=(
        "builtin (realistic prompts shipped with spectune), synthetic (prompts of input_tokens "
        "tokens) or the path of a JSONL prompt file, relative to the study file."))
    input_tokens: PositiveInt = Field(WorkloadSpec.input_tokens, le=MAX_COUNT,
                                      description="Prompt length of synthetic prompts.")
    # Bounded by the longest context any served model has: beyond it a request only waits to be cut
    # off.
    max_tokens: PositiveInt = Field(WorkloadSpec.max_tokens, le=MAX_COUNT,
                                    description="Tokens generated per request (at most).")
    temperature: float | None = Field(None, ge=0, description=(
        f"Sampling temperature (default: {WorkloadSpec.temperature} with preset realistic, 0 with "
        "seed)."))
    ignore_eos: bool | None = Field(None, description=(
        f"Generate past EOS (default: {str(WorkloadSpec.ignore_eos).lower()} with preset "
        "realistic, true with seed)."))
    model: str | None = Field(None,
                              description="The model name requests send (default: ask /v1/models).")
    seed: Seed = Field(WorkloadSpec.seed, description="Seed of prompt selection and sampling.")
    request_timeout: PositiveDuration = Field(WorkloadSpec.request_timeout_s,
                                              description="The most one request may take.")
    connect_timeout: PositiveDuration = Field(WorkloadSpec.connect_timeout_s,
                                              description="The most connecting to the server may "
                                                          "take.")
    phases: list[PhaseSection] | None = Field(None, min_length=1, description=(
        "The phases, in order (default: { concurrency = 1, requests = 8 } then "
        "{ concurrency = 64, requests = 256, warmup = 8 })."))
    ci_target: float | None = Field(None, gt=0, lt=1, allow_inf_nan=False, description=(
        "The precision asked of each trial's score: the 95 % interval's half-width as a fraction "
        "(0.03: ±3 %). Sets the phases' request counts (a phase's own `requests` is a floor; "
        "docs/scoring.md)."))

    @field_validator("dataset")
    @classmethod
    def _prompt_file(cls, value: str, info: ValidationInfo) -> str:
        if value in ("builtin", "synthetic"):
            return value
        resolved = resolve_path(value, info)
        if not resolved.is_file():
            raise ValueError(f"prompt file not found: {resolved}")
        # Read and parsed here, as every trial would: a file that is not JSONL, or holds no prompt,
        # is refused by `validate` rather than by the first trial's benchmark.
        try:
            parse_jsonl(resolved.read_text(encoding="utf-8"), str(resolved))
        except OSError as exc:
            raise ValueError(f"cannot read prompt file {resolved}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ValueError(f"prompt file {resolved} is not UTF-8 text") from None
        except WorkloadError as exc:
            more = len(exc.problems) - 1
            raise ValueError(f"not a JSONL prompt file: {exc.problems[0]}"
                             + (f" (and {more} more problems)" if more > 0 else "")) from None
        return str(resolved)

    def check(self) -> Iterator[tuple[str, str]]:
        seen: set[int] = set()
        for i, phase in enumerate(self.phases or ()):
            if phase.concurrency in seen:
                yield (f"phases[{i}].concurrency",
                       f"concurrency {phase.concurrency} appears in two phases")
            seen.add(phase.concurrency)

    def to_spec(self) -> BenchmarkSpec:
        seeded = self.preset == "seed"  # the seed campaign: greedy decoding, generation past EOS
        temperature = self.temperature if self.temperature is not None else (
            0.0 if seeded else WorkloadSpec.temperature)
        ignore_eos = self.ignore_eos if self.ignore_eos is not None else (
            seeded or WorkloadSpec.ignore_eos)
        workload = WorkloadSpec(
            api=self.api, dataset=self.dataset, input_tokens=self.input_tokens,
            max_tokens=self.max_tokens,
            temperature=float(temperature), ignore_eos=ignore_eos, model=self.model, seed=self.seed,
            request_timeout_s=self.request_timeout, connect_timeout_s=self.connect_timeout)
        if not self.phases:
            return BenchmarkSpec(workload=workload)
        return BenchmarkSpec(workload=workload, phases=tuple(p.to_spec() for p in self.phases))


# ----- [objective] and [finish] -------------------------------------------------------------------
class ObjectiveSection(FileModel):
    """``[objective]``: how a trial's phases become one score, and which trials are feasible."""

    weights: dict[str, Weight] | None = Field(None, description=(
        "Weight of each phase's score, keyed by phase: c1 = 0.7, c64 = 0.3 (C=1 scores per-request "
        "tok/s, larger C aggregate tok/s). Default: equal weights."),
        json_schema_extra={"propertyNames": {"pattern": r"^c\d+$"}})
    constraints: list[str] = Field(default_factory=list, description=(
        "Feasibility rules METRIC OP NUMBER, optionally on one phase: \"error_rate <= 0.01\", "
        "\"c64.ttft_p99_ms < 2000\" (metrics: docs/metrics.md)."))
    mode: MetricMode = Field("weighted", description=(
        "weighted (one score) or pareto (two weighted phases, a Pareto front of both)."))


class FinishSection(FileModel):
    """``[finish]``: what the target runs when the study ends."""

    deploy: FinishAction = Field("original", description=(
        "original (restore the server's own configuration), best (deploy the winner) or leave (as "
        "it is)."))


# ----- the whole file -----------------------------------------------------------------------------
def _target_union() -> Any:
    """The ``[target]`` table: the settings model of its ``kind`` (tuner/targets/registry.py)."""
    models = tuple(model for model, _ in TARGETS.values())
    # typing.Union, not X | Y: the union is built at runtime
    return Annotated[typing.Union[models], Field(discriminator="kind")]  # noqa: UP007


if TYPE_CHECKING:
    TargetSection = TargetSettings
else:
    TargetSection = _target_union()


class StudyFile(FileModel):
    """A spectune study file: what to tune, on which target, measured how."""

    study: StudySection = Field(description="The study's name, storage and budget.")
    target: TargetSection = Field(
        description="Where trials deploy the server; the keys depend on kind.")
    server: ServerSection = Field(default_factory=ServerSection,
                                  description="Fixed flags and environment.")
    search: dict[str, SearchParam] = Field(description=(
        "The tuned flags, named without the leading -- (e.g. speculative-num-steps = { min = 1, "
        "max = 8 })."))
    baseline: dict[str, FlagValueField] = Field(default_factory=dict, description=(
        "The server's current value of every tuned flag; measured first."))
    benchmark: BenchmarkSection = Field(default_factory=BenchmarkSection,
                                        description="What every trial sends.")
    objective: ObjectiveSection = Field(default_factory=ObjectiveSection,
                                        description="How trials are scored.")
    finish: FinishSection = Field(default_factory=FinishSection,
                                  description="What runs when the study ends.")
    check: CheckSection = Field(default_factory=CheckSection, description=(
        "Checks besides speed: outputs unchanged at temperature 0 (on by default)."))


#: What a missing required section lacks, in the words of its error line.
MISSING_SECTION = {
    "study": "missing section (needs at least name)",
    "target": "missing section (needs at least kind)",
    "search": "missing section: name at least one flag to tune",
}
