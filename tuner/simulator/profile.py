"""A simulated deployment: one model + draft on one GPU box, described by a handful of physical
parameters.

A profile is a TOML data file (``profiles/*.toml`` ship with spectune; any path works too).
Everything the simulator models comes from it: memory (weights, KV bytes per token, graph memory),
timings of one decode iteration (draft step, verify token, fixed overhead), prefill, acceptance per
draft position, and how long startup takes. Parameters are plain numbers so that a profile can be
fitted offline (``bench/``) and hard-coded; the runtime needs no fitting library.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from tuner.core.errors import SpectuneError
from tuner.simulator.faults import FaultRule, parse_faults

DEFAULT_PROFILE = "qwen3.5-122b-a10b-eagle3-4x-rtx-pro-6000"


class ProfileError(SpectuneError):
    """A profile name that does not exist, or a profile file that is missing a value or
    malformed."""

    exit_code = 2


@dataclass(frozen=True)
class ModelSpec:
    path: str
    architecture: str
    context_length: int
    weights_gb: float  # target weights, summed over all tensor-parallel ranks
    draft_path: str
    draft_weights_gb: float  # replicated on every rank
    # per GPU, target + draft pools together, at tp_size = hardware.num_gpus
    kv_bytes_per_token: float
    num_layers: int
    # EOS rule when ignore_eos is false: natural length uniform on [eos_min_tokens, eos_max_tokens]
    eos_min_tokens: int
    eos_max_tokens: int


@dataclass(frozen=True)
class HardwareSpec:
    gpu_name: str
    gpu_memory_gb: float
    num_gpus: int
    default_attention_backend: str  # chosen when topk is unset or 1
    tree_attention_backend: str  # chosen for an explicit topk > 1
    forced_page_size: dict[str, int]  # backends that force a page size (e.g. trtllm_mha → 64)


@dataclass(frozen=True)
class TimingSpec:
    """Milliseconds, at the batch/graph sizes described by each name (see docs/simulator.md)."""

    # CPU work per iteration (scheduling, sampling bookkeeping), overlapped with the GPU
    scheduler_ms: float
    # ... plus this per running request (Python work per request per iteration)
    scheduler_request_ms: float
    # how completely the overlap scheduler hides the shorter of CPU and GPU time
    overlap_sharpness: float
    # fixed GPU part of the verify forward (weights read once per iteration)
    iteration_base_ms: float
    draft_step_ms: float  # fixed cost of one autoregressive draft forward
    draft_token_ms: float  # extra per token in a draft forward (batch × topk tokens)
    verify_token_ms: float  # extra per token in the verify forward (batch × draft tokens)
    context_ms_per_ktok: float  # attention over the context, per request per 1000 context tokens
    prefill_base_ms: float
    prefill_token_ms: float  # per prompt token (target prefill + draft extend)
    eager_factor: float  # a decode iteration without CUDA graphs is this much slower ...
    eager_launch_ms: float  # ... plus this per forward (kernel launches)
    noise: float  # half-width of the uniform multiplicative noise on each iteration
    attention_backend_factor: dict[str, float]  # multiplies the per-token parts; missing → 1.0


@dataclass(frozen=True)
class AcceptanceSpec:
    """Probability that draft position i is accepted given i−1 was: it starts at ``first`` and moves
    geometrically towards ``limit`` (``limit − (limit − first)·decay^(i−1)``). The limit may lie
    above the first position: acceptance is bursty, so a draft that got position 1 right is in a
    predictable stretch and likely to get the next one right too."""

    first: float
    limit: float
    decay: float
    topk_exponent: float  # w siblings act like w^e independent tries at a position
    temperature_penalty: float  # acceptance × exp(−penalty · temperature)
    predictability_sensitivity: float  # how much prompt repetitiveness moves acceptance
    reference_compression_ratio: float  # zlib ratio of a typical prompt (multiplier 1)
    max_rate: float


@dataclass(frozen=True)
class MtpSpec:
    """``[mtp]``: the model's own multi-token-prediction layer(s) as the draft
    (``--speculative-algorithm NEXTN``). No separate draft model: ``weights_gb`` is the MTP layer
    SGLang loads beside the target (per GPU). Acceptance follows the same curve as
    ``AcceptanceSpec``; a profile without this section has no MTP head (NEXTN fails)."""

    weights_gb: float
    draft_step_ms: float
    draft_token_ms: float
    first: float
    limit: float
    decay: float


@dataclass(frozen=True)
class NgramSpec:
    """``[ngram]``: n-gram speculation (``NGRAM``) drafts from a trie of the text seen so far, on
    the CPU. The first position is accepted with ``base`` at a typical prompt (zlib ratio
    ``reference_compression_ratio``) and ``base + sensitivity · (reference − ratio)`` otherwise,
    within [min_rate, max_rate]; deeper positions follow ``limit``/``decay`` as in
    ``AcceptanceSpec``. ``match_ms`` is the trie lookup per request per iteration (CPU side)."""

    base: float
    sensitivity: float
    reference_compression_ratio: float
    min_rate: float
    max_rate: float
    limit: float
    decay: float
    # BFS siblings are frequency-ranked continuations: they add less than a draft's top-k
    topk_exponent: float
    match_ms: float


@dataclass(frozen=True)
class StandaloneSpec:
    """``[standalone]``: a small ordinary language model as the draft (``STANDALONE``): a full
    forward per step, its own weights, and an acceptance ``acceptance_scale`` × the EAGLE
    draft's."""

    draft_path: str
    weights_gb: float
    draft_step_ms: float
    draft_token_ms: float
    acceptance_scale: float


@dataclass(frozen=True)
class AdaptiveSpec:
    """``[adaptive]``: the cost of one switch of SGLang's adaptive steps
    (``--speculative-adaptive``): the draft runtime state (attention metadata, graph set) swapped
    before the next iteration."""

    switch_ms: float


#: Used where a profile has no ``[ngram]`` / ``[adaptive]`` section (docs/simulator.md: their
#: sources).
DEFAULT_NGRAM = NgramSpec(base=0.15, sensitivity=1.6, reference_compression_ratio=0.5,
                          min_rate=0.05, max_rate=0.92,
                          limit=0.55, decay=0.7, topk_exponent=0.3, match_ms=0.02)
DEFAULT_ADAPTIVE = AdaptiveSpec(switch_ms=0.5)


@dataclass(frozen=True)
class MemorySpec:
    non_torch_gb: float  # CUDA context, NCCL buffers: outside the static pool
    graph_base_gb: float
    graph_gb_per_token: float  # graph memory per (batch size × tokens per request) captured


@dataclass(frozen=True)
class StartupSpec:
    """Seconds at time scale 1."""

    process_start_s: float
    load_weights_s: float
    load_draft_s: float
    kv_alloc_s: float
    graph_base_s: float  # per captured graph family (target verify, draft decode, draft extend)
    graph_per_bs_s: float  # per captured batch size ...
    graph_per_token_factor: float  # ... × (1 + factor · (tokens per request − 1))
    draft_graph_factor: float  # draft capture is slower than target capture (#10088)
    server_start_s: float


@dataclass(frozen=True, eq=False)  # hashed by identity: loaded once (cached), used as a cache key
class Profile:
    name: str
    description: str
    source: str  # file it was read from
    model: ModelSpec
    hardware: HardwareSpec
    timing: TimingSpec
    acceptance: AcceptanceSpec
    memory: MemorySpec
    startup: StartupSpec
    #: How a started server fails (tuner/simulator/faults.py); none in the shipped profiles.
    faults: tuple[FaultRule, ...] = ()
    mtp: MtpSpec | None = None  # None: the model has no MTP head
    ngram: NgramSpec = DEFAULT_NGRAM
    standalone: StandaloneSpec | None = None  # None: derived from the EAGLE draft (speculation.py)
    adaptive: AdaptiveSpec = DEFAULT_ADAPTIVE


_T = TypeVar("_T")


def _section(cls: type[_T], data: dict[str, Any], name: str, source: str) -> _T:
    table = data.get(name)
    if not isinstance(table, dict):
        raise ProfileError(f"{source}: missing section [{name}]")
    values: dict[str, Any] = {}
    problems = []
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in table:
            if f.type.startswith("dict"):
                values[f.name] = {}
                continue
            problems.append(f"{source}: [{name}] is missing {f.name}")
            continue
        values[f.name] = table[f.name]
    unknown = sorted(set(table) - {f.name for f in fields(cls)})  # type: ignore[arg-type]
    problems += [f"{source}: [{name}] has unknown key {key}" for key in unknown]
    if problems:
        raise ProfileError("\n".join(problems))
    return cls(**values)


def parse_profile(data: dict[str, Any], source: str) -> Profile:
    try:
        faults = parse_faults(data.get("faults"), source)
    except ValueError as exc:
        raise ProfileError(str(exc)) from None
    return Profile(
        name=str(data.get("name", Path(source).stem)),
        description=str(data.get("description", "")),
        source=source,
        model=_section(ModelSpec, data, "model", source),
        hardware=_section(HardwareSpec, data, "hardware", source),
        timing=_section(TimingSpec, data, "timing", source),
        acceptance=_section(AcceptanceSpec, data, "acceptance", source),
        memory=_section(MemorySpec, data, "memory", source),
        startup=_section(StartupSpec, data, "startup", source),
        faults=faults,
        mtp=_section(MtpSpec, data, "mtp", source) if "mtp" in data else None,
        ngram=_section(NgramSpec, data, "ngram", source) if "ngram" in data else DEFAULT_NGRAM,
        standalone=_section(StandaloneSpec, data, "standalone", source) if "standalone" in data
        else None, adaptive=_section(AdaptiveSpec, data, "adaptive", source) if "adaptive" in data
        else DEFAULT_ADAPTIVE,
    )


def shipped_profiles() -> list[str]:
    folder = resources.files("tuner.simulator").joinpath("profiles")
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


@cache
def load_profile(name_or_path: str = DEFAULT_PROFILE) -> Profile:
    """A shipped profile by name, or any profile file by path (cached: benchmarks call this a
    lot)."""
    shipped = resources.files("tuner.simulator").joinpath("profiles").joinpath(
        f"{name_or_path}.toml")
    if "/" not in name_or_path and shipped.is_file():
        text, source = shipped.read_text(encoding="utf-8"), f"{name_or_path}.toml"
    else:
        path = Path(name_or_path)
        if not path.is_file():
            names = ", ".join(shipped_profiles())
            raise ProfileError(
                f"no simulator profile {name_or_path!r}: not a shipped name ({names}) nor a file")
        text, source = path.read_text(encoding="utf-8"), str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{source}: {exc}") from exc
    return parse_profile(data, source)
