"""From a ``launch_server`` command line to the resolved configuration the simulator runs.

This is the one code path shared by the live simulator and the ground-truth function, so both agree
on what a command line means: SGLang's parser (the shipped option table, abbreviations on), SGLang's
validity rules and resolution (``tuner.sglang.rules``, for the profile's model architecture and GPU:
attention backend, page size, auto-chosen tree, graphs off), and the values SGLang derives from
memory at startup (running-request cap, CUDA-graph batch sizes, memory fraction, KV capacity).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.sglang import rules
from tuner.sglang.hardware import Hardware, capability_of_gpu
from tuner.sglang.parse import PROG, InvalidServerArgs, parse_server_args
from tuner.simulator import speculation
from tuner.simulator.adaptive import AdaptiveConfig, AdaptiveConfigError, load_config
from tuner.simulator.memory import MemoryPlan, plan_memory
from tuner.simulator.profile import Profile
from tuner.simulator.speculation import SpecKind

__all__ = ["PROG", "InvalidServerArgs", "ServerConfig", "parse_server_args", "require_valid",
           "resolve"]

@dataclass(frozen=True)
class ServerConfig:
    """Everything the simulator needs about one server, after SGLang's own resolution."""

    argv: tuple[str, ...]
    args: Mapping[str, Any]  # every resolved server argument, as /server_info shows them
    model_path: str
    served_model_name: str
    host: str
    port: int
    tp_size: int
    speculative: bool
    algorithm: str | None
    num_steps: int  # 0 without speculation
    topk: int  # 1 without speculation
    draft_tokens: int  # tokens verified per request per iteration (1 without speculation)
    attention_backend: str
    page_size: int
    max_running_requests: int
    chunked_prefill_size: int
    max_prefill_tokens: int
    context_length: int
    mem_fraction_static: float
    cuda_graph_bs: tuple[int, ...]  # empty: decode CUDA graphs disabled
    memory: MemoryPlan
    warnings: tuple[str, ...]  # logged at startup, in order
    startup_error: rules.RuleViolation | None  # the server exits before loading weights
    runtime_error: str | None  # the server starts, then every generation fails
    kind: SpecKind = SpecKind.OFF
    #: ``--speculative-adaptive`` as it runs (None: off, or turned off by SGLang with a warning)
    adaptive: AdaptiveConfig | None = None
    overlap: bool = True  # the overlap scheduler (off: --disable-overlap-schedule)

    @property
    def cuda_graph_max_bs(self) -> int:
        return max(self.cuda_graph_bs, default=0)

    @property
    def max_total_num_tokens(self) -> int:
        return self.memory.kv_tokens


def default_graph_ladder(max_bs: int) -> list[int]:
    """SGLang's speculative capture ladder: 1–8, 10–32 step 2, 40–64 step 4, 72–256 step 8, then
    step 16."""
    ladder = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8),
              *range(272, 4097, 16)]
    return [bs for bs in ladder if bs <= max_bs]


def _default_chunked_prefill(gpu_gb: float) -> int:
    if gpu_gb < 20:
        return 2048
    if gpu_gb < 60:
        return 4096
    return 8192 if gpu_gb < 160 else 16384


def _default_graph_max_bs(gpu_gb: float, tp: int) -> int:
    if gpu_gb < 20:
        return 8
    if gpu_gb < 35:
        return 160 if tp >= 4 else 48
    if gpu_gb < 60:
        return 160 if tp >= 4 else 32
    if gpu_gb < 160:
        return 512 if tp >= 4 else 256
    return 512


def _auto_mem_fraction(gpu_gb: float, chunked: int, graph_max_bs: int) -> float:
    # memory_hook.py: a reserve of at least 10 GB on big GPUs, 1.5 MB per chunked-prefill token and
    # 2 MB per decode-graph batch unit.
    floor_gb = 10.0 if gpu_gb > 60 else gpu_gb * 0.12
    reserve = max(floor_gb, 0.0015 * max(chunked, 0) + 0.002 * graph_max_bs)
    return round((gpu_gb - reserve) / gpu_gb, 3)


def resolve(profile: Profile, argv: Sequence[str], *, exit_on_error: bool = True) -> ServerConfig:
    """Parse ``argv`` and apply SGLang's rules and derivations. Never raises for SGLang-level
    errors: those are recorded on the config (``startup_error``, ``memory.failure``,
    ``runtime_error``) so the live server can fail at the right moment of its startup."""
    args = parse_server_args(argv, exit_on_error=exit_on_error)
    hw = profile.hardware
    verdict = rules.judge(args, profile_hardware(profile))
    startup_error = verdict.violation
    runtime_error = verdict.runtime.message if verdict.runtime is not None else None
    eff = verdict.effective or {}
    algorithm = eff.get("speculative_algorithm") if startup_error is None else None
    speculative = algorithm is not None
    # Algorithms without a draft tree of their own (DFLASH, UNO ...) run one draft step of one
    # token.
    steps = _or(eff.get("speculative_num_steps"), 1) if speculative else 0
    topk = _or(eff.get("speculative_eagle_topk"), 1) if speculative else 1
    draft = max(_or(eff.get("speculative_num_draft_tokens"), steps + 1), 1) if speculative else 1
    warnings: list[str] = []
    kind = speculation.kind_of(args.get("speculative_algorithm"), algorithm)
    adaptive: AdaptiveConfig | None = None
    if speculative and args.get("speculative_adaptive"):
        reason = rules.adaptive_disabled_reason(args, eff)
        if reason is not None:
            warnings.append(f"speculative_adaptive disabled: {reason}. Falling back to static "
                            "speculative params.")
        else:
            try:
                adaptive = load_config(args.get("speculative_adaptive_config"),
                                       args.get("speculative_num_steps"))
            except AdaptiveConfigError as exc:
                startup_error = startup_error or rules.RuleViolation("adaptive-config", str(exc))
            else:
                steps, topk, draft = adaptive.initial_steps, 1, adaptive.initial_steps + 1
    if kind is SpecKind.MTP and profile.mtp is None and args.get("speculative_draft_model_path"):
        kind = SpecKind.EAGLE  # NEXTN = EAGLE: with a draft model named, that model drafts
    elif startup_error is None and kind is SpecKind.MTP and profile.mtp is None:
        # The draft worker loads the target's MTP layers; a checkpoint without them has none to
        # load.
        startup_error = rules.RuleViolation("no-mtp", (
            f"ValueError: {profile.model.architecture} has no MTP (nextn) layers: "
            "--speculative-algorithm NEXTN needs a model that ships them (num_nextn_predict_layers "
            "> 0)"))
    overlap = not args.get("disable_overlap_schedule")
    if speculative and not overlap and kind in (SpecKind.EAGLE, SpecKind.MTP, SpecKind.STANDALONE):
        warnings.append("Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone "
                        "speculative decoding.")
    given_draft = args.get("speculative_num_draft_tokens")
    if speculative and topk == 1 and given_draft is not None and given_draft != draft:
        warnings.append(rules.TOPK1_WARNING)

    # SGLang's own choice (flashinfer for trees, the GPU's default otherwise) and the page size it
    # forces.
    backend = (eff.get("attention_backend") or args.get("attention_backend")
               or hw.default_attention_backend)
    page_size = int(eff.get("page_size") or args.get("page_size") or 1)
    if startup_error is None:
        startup_error = _context_length_error(profile, args)

    tp = int(args.get("tp_size") or 1)
    if startup_error is None and tp > hw.num_gpus:
        # torch.cuda.set_device on a rank without a GPU.
        startup_error = rules.RuleViolation("gpus",
                                            "RuntimeError: CUDA error: invalid device ordinal")
    chunked = args.get("chunked_prefill_size")
    chunked = _default_chunked_prefill(hw.gpu_memory_gb) if chunked is None else int(chunked)
    graph_max = args.get("cuda_graph_max_bs_decode")
    graph_max = _default_graph_max_bs(hw.gpu_memory_gb, tp) if graph_max is None else int(graph_max)
    mem_fraction = args.get("mem_fraction_static")
    mem_fraction = (_auto_mem_fraction(hw.gpu_memory_gb, chunked, graph_max) if mem_fraction is None
                    else float(mem_fraction))
    context_length = int(args.get("context_length") or profile.model.context_length)

    explicit_running = rules.effective_max_running_requests(args) if speculative else (
        args.get("max_running_requests"))
    if speculative and args.get("max_running_requests") is None:
        warnings.append(rules.MAX_RUNNING_WARNING)

    graphs_off = bool(args.get("disable_cuda_graph") or args.get("disable_decode_cuda_graph")
                      or args.get("cuda_graph_backend_decode") == "disabled"
                      or eff.get("cuda_graph_disabled"))
    # Graph sizes depend on the running-request cap, which (without speculation) depends on KV
    # capacity: plan memory with the uncapped list first, then clip.
    explicit_bs = args.get("cuda_graph_bs_decode")
    ladder = sorted(set(explicit_bs)) if explicit_bs else default_graph_ladder(graph_max)
    draft_gb = speculation.draft_weights_gb(profile, kind)
    memory = plan_memory(profile, tp_size=tp, mem_fraction=mem_fraction, draft_weights_gb=draft_gb,
                         graph_tokens=0, max_total_tokens=args.get("max_total_tokens"))
    if explicit_running is not None:
        max_running = int(explicit_running)
    else:
        kv = memory.kv_tokens
        max_running = min(max(kv // context_length * 512, 2048), 4096)
        max_running = max(1, min(max_running, kv // 2))
    graph_bs: tuple[int, ...] = (() if graphs_off
                                 else tuple(bs for bs in ladder if bs <= max_running))
    if not graphs_off and not graph_bs:
        graph_bs = (1,)
    graph_draft = adaptive.max_steps + 1 if adaptive is not None else draft
    memory = plan_memory(profile, tp_size=tp, mem_fraction=mem_fraction, draft_weights_gb=draft_gb,
                         graph_tokens=max(graph_bs, default=0) * graph_draft,
                         max_total_tokens=args.get("max_total_tokens"))

    resolved = dict(args)
    resolved.update(
        model_path=args.get("model_path") or profile.model.path,
        served_model_name=args.get("served_model_name") or args.get("model_path")
        or profile.model.path,
        speculative_algorithm=algorithm if speculative else args.get("speculative_algorithm"),
        # As SGLang shows them (None or 0 where it leaves them so); the model above needs a usable
        # tree.
        speculative_num_steps=eff["speculative_num_steps"] if speculative
        else args.get("speculative_num_steps"),
        speculative_eagle_topk=eff["speculative_eagle_topk"] if speculative
        else args.get("speculative_eagle_topk"),
        speculative_num_draft_tokens=eff["speculative_num_draft_tokens"] if speculative
        else args.get(
            "speculative_num_draft_tokens"),
        attention_backend=backend,
        page_size=page_size,
        max_running_requests=max_running,
        chunked_prefill_size=chunked,
        cuda_graph_max_bs_decode=max(graph_bs, default=graph_max),
        cuda_graph_bs_decode=list(graph_bs),
        mem_fraction_static=mem_fraction,
        context_length=context_length,
        tp_size=tp,
    )
    return ServerConfig(
        argv=tuple(argv),
        args=resolved,
        model_path=resolved["model_path"],
        served_model_name=resolved["served_model_name"],
        host=str(args.get("host") or "127.0.0.1"),
        port=int(args.get("port") or 30000),
        tp_size=tp,
        speculative=speculative,
        algorithm=algorithm,
        num_steps=steps,
        topk=topk,
        draft_tokens=draft,
        attention_backend=backend,
        page_size=page_size,
        max_running_requests=max_running,
        chunked_prefill_size=chunked,
        max_prefill_tokens=int(args.get("max_prefill_tokens") or 16384),
        context_length=context_length,
        mem_fraction_static=mem_fraction,
        cuda_graph_bs=graph_bs,
        memory=memory,
        warnings=tuple(warnings),
        startup_error=startup_error,
        runtime_error=runtime_error,
        kind=kind,
        adaptive=adaptive,
        overlap=overlap,
    )


def _or(value: Any, default: int) -> int:
    return default if value is None else int(value)


#: SGLang's escape hatch for a context longer than the model's (model_config.py).
ALLOW_LONGER_CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


def profile_hardware(profile: Profile) -> Hardware:
    """What SGLang would read on the simulated box: the model's architecture and the GPU's
    capability."""
    return Hardware(profile.model.architecture, capability_of_gpu(profile.hardware.gpu_name))


def _context_length_error(profile: Profile, args: Mapping[str, Any]) -> rules.RuleViolation | None:
    """model_config.py: a --context-length above the model's is refused unless the environment
    allows it."""
    given, derived = args.get("context_length"), profile.model.context_length
    if given is None or int(given) <= derived or os.environ.get(ALLOW_LONGER_CONTEXT_ENV):
        return None
    return rules.RuleViolation("context-length", (
        f"ValueError: Warning: User-specified context_length ({int(given)}) is greater than the "
        f"derived context_length ({derived}). This may lead to incorrect model outputs or CUDA "
        "errors. Note that the derived context_length may differ from max_position_embeddings in "
        "the model's config. To allow overriding this maximum, set the env var "
        f"{ALLOW_LONGER_CONTEXT_ENV}=1"))


def require_valid(config: ServerConfig) -> None:
    """Raise ``InvalidServerArgs`` if this server would not start or would fail every request."""
    if config.startup_error is not None:
        raise InvalidServerArgs("config", config.startup_error.message)
    if config.memory.failure is not None:
        raise InvalidServerArgs("oom", config.memory.failure)
    if config.runtime_error is not None:
        raise InvalidServerArgs("runtime", config.runtime_error)
