"""SGLang 0.5.23's argument resolution for speculative decoding, as a pure function: refused, or
what runs.

This is the fallback used where the real SGLang cannot be asked: it follows the hooks under
``srt/arg_groups/`` in the order ``pipeline.py`` runs them (attention backend and page size first,
the speculative hook last), and is held to the real code by
``tests/fixtures/sglang-0.5.23-fidelity.json``.

Inputs SGLang reads from outside the command line are explicit: the model's architecture
(``config.json`` ``architectures[0]``) and the GPU's compute capability. Where the architecture is
unknown the auto-chosen draft tree cannot be known either; it is then reported as ``None`` (SGLang's
choice), never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

#: Algorithms spectune knows; SGLang upper-cases the name and rejects others.
SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK",
                          "UNO")

#: ``_auto_choose_speculative_params``: (5, 4, 8) for these, (3, 1, 4) for every other model (and
#: STANDALONE).
DEEP_TREE_ARCHITECTURES = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")
#: Backends whose kernels only exist for 64-token pages
#: (``overrides.py::_mla_backend_page_constraints``).
PAGE64_BACKENDS = ("flashmla", "trtllm_mla", "cutedsl_mla", "hpc_ops")
#: ``--speculative-adaptive``'s default candidate steps (``adaptive_spec_params.py``).
ADAPTIVE_STEPS = (0, 1, 3, 5, 7)
#: SGLang's choice aliases (``choices.py``).
BACKEND_ALIASES = {"compressed": "dsv4"}
HOPPER = (9, 0)
#: Every argument ``resolve`` reads (tests/unit/sglang/test_fidelity.py checks it over the fixture):
#: callers may cache a verdict by these alone.
RESOLUTION_INPUTS = (
    "attention_backend", "attn_dp_size", "decode_attention_backend", "disable_cuda_graph",
    "enable_dp_attention",
    "max_running_requests", "page_size", "prefill_attention_backend", "speculative_adaptive",
    "speculative_adaptive_config",
    "speculative_algorithm", "speculative_attention_mode", "speculative_draft_attention_backend",
    "speculative_draft_sink_size", "speculative_draft_window_size", "speculative_eagle_topk",
    "speculative_ngram_max_bfs_breadth", "speculative_num_draft_tokens", "speculative_num_steps",
    "speculative_use_rejection_sampling",
)


@dataclass(frozen=True)
class RuleViolation:
    """A configuration SGLang refuses; ``message`` is the last line SGLang's traceback prints.

    ``stage`` says when the real server notices: ``startup`` (the process exits before loading
    weights) or ``runtime`` (the server starts, then every request fails — the over-large tree of
    #5160).
    """

    rule: str
    message: str
    stage: Literal["startup", "runtime"] = "startup"


@dataclass(frozen=True)
class Effective:
    """The values SGLang runs with (``None`` where it is unknown or not applicable)."""

    speculative_algorithm: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None
    page_size: int
    attention_backend: str | None
    cuda_graph_disabled: bool
    max_running_requests: int | None


def _err(rule: str, message: str) -> RuleViolation:
    return RuleViolation(rule, message)


def _backend(name: Any) -> str | None:
    return None if name is None else BACKEND_ALIASES.get(str(name), str(name))


def _default_backend(capability: tuple[int, int], explicit_topk: int | None, page: int) -> str:
    """``model_override_base.py::get_default_attn_backend`` for MHA models."""
    tree = explicit_topk is not None and not (explicit_topk == 1 and page == 1)
    if capability == HOPPER:
        return "flashinfer" if tree else "fa3"
    if capability[0] == 10:
        return "flashinfer" if tree else "trtllm_mha"
    return "flashinfer"


def _page_size(backend: str | None, page: int | None, capability: tuple[int, int],
               topk: int | None) -> int:
    """The page size SGLang forces for a backend (overrides.py)."""
    if backend in PAGE64_BACKENDS:
        return 64
    if backend == "trtllm_mha" and (page or 1) < 16:
        return 64
    if backend == "fa4" and capability[0] == 10 and (topk or 1) == 1:
        return 128
    # overrides.py::_intel_xpu_page_constraint (non-MLA)
    if backend == "intel_xpu" and page not in (64, 128):
        return 128
    return page or 1


def _hardware(backends: tuple[str | None, ...],
              capability: tuple[int, int]) -> RuleViolation | None:
    """The hardware gates of ``attention_hook.py`` / ``overrides.py``, in SGLang's order."""
    major = capability[0]
    if "trtllm_mla" in backends and major not in (10, 12):
        return _err("hardware", "ValueError: TRTLLM MLA backend is only supported on Blackwell "
                                "GPUs (SM100/SM12x). Please use a different backend.")
    if "cutedsl_mla" in backends and major != 10:
        return _err("hardware",
                    "ValueError: CuteDSL MLA backend is only supported on Blackwell GPUs (SM100). "
                    "Please use a different backend.")
    return None


def resolve(args: Mapping[str, Any], *, model_architecture: str | None,
            compute_capability: tuple[int, int] = HOPPER) -> tuple[RuleViolation | None,
                                                                   Effective | None]:
    """SGLang's verdict on parsed ``args`` (argparse dests): (the error it exits with, None) or
    (None, values)."""
    algorithm = args.get("speculative_algorithm")
    algorithm = None if algorithm is None else str(algorithm).upper()
    prefill, decode = _backend(args.get("prefill_attention_backend")), _backend(
        args.get("decode_attention_backend"))
    explicit = _backend(args.get("attention_backend"))
    steps, topk, draft = (args.get("speculative_num_steps"), args.get("speculative_eagle_topk"),
                          args.get("speculative_num_draft_tokens"))
    if algorithm == "NGRAM":
        topk = int(args.get("speculative_ngram_max_bfs_breadth") or 10)
    page_in = args.get("page_size")
    # The default backend looks at the topk the user gave, not NGRAM's breadth or an auto-chosen
    # one.
    backend = explicit or _default_backend(compute_capability, args.get("speculative_eagle_topk"),
                                           page_in or 1)
    violation = _hardware((backend, prefill, decode), compute_capability)
    if violation:
        return violation, None
    page = _page_size(backend, page_in, compute_capability, topk)
    for side in (decode, prefill, _backend(args.get("speculative_draft_attention_backend"))):
        if side == "trtllm_mha":
            page = _page_size(side, page, compute_capability, topk)
    graphs_off = bool(args.get("disable_cuda_graph")) or backend in ("torch_native",
                                                                     "flex_attention")
    if backend == "flex_attention" and algorithm is not None:
        return _err("flex-attention",
                    "AssertionError: Speculative decoding is currently not supported with "
                    "Flex Attention backend"), None
    running = args.get("max_running_requests")
    if algorithm is None:
        return None, Effective(None, steps, topk if topk is not None else None, draft, page,
                               backend, graphs_off, running)
    if algorithm not in SPECULATIVE_ALGORITHMS:
        return _err("unknown-algorithm",
                    f"ValueError: Unknown speculative algorithm name: {algorithm}"), None
    if algorithm == "NEXTN":
        algorithm = "EAGLE"
    window, sink = args.get("speculative_draft_window_size"), args.get(
        "speculative_draft_sink_size")
    if window is not None and int(window) <= 0:
        return _err("draft-window",
                    f"ValueError: --speculative-draft-window-size must be positive, got "
                    f"{window}."), None
    if sink is not None and int(sink) < 0:
        return _err("draft-window",
                    f"ValueError: --speculative-draft-sink-size must be non-negative, got "
                    f"{sink}."), None
    if sink is not None and window is None:
        return _err("draft-window", "ValueError: --speculative-draft-sink-size requires "
                                    "--speculative-draft-window-size."), None
    if algorithm == "STANDALONE" and ((args.get("attn_dp_size") or 1) > 1
                                      or args.get("enable_dp_attention")):
        return _err("dp-attention",
                    "ValueError: Currently standalone speculative decoding does not support dp "
                    "attention."), None
    running = 48 if running is None else int(running)
    if algorithm == "NGRAM":
        return _ngram(args, topk or 10, draft, steps, page, backend, graphs_off, running)
    if algorithm not in ("EAGLE", "EAGLE3", "STANDALONE"):
        return None, Effective(algorithm, steps, topk, draft, page, backend, graphs_off, running)
    adaptive = bool(args.get("speculative_adaptive")) and algorithm in ("EAGLE",
                                                                        "EAGLE3") and topk in (None,
                                                                                               1)
    if adaptive:
        topk = 1
        steps = 3 if steps is None else steps
        # A custom --speculative-adaptive-config names other candidates; that file is read on the
        # server's host.
        if steps not in ADAPTIVE_STEPS and args.get("speculative_adaptive_config") is None:
            return _err("adaptive", f"ValueError: --speculative-num-steps={steps} is not in the "
                                    f"adaptive config candidate_steps {list(ADAPTIVE_STEPS)}. Pass "
                                    "one of those values."), None
        draft = steps + 1
    if steps is None:
        if topk is not None or draft is not None:
            return _err("all-three-or-none", "AssertionError"), None
        if model_architecture is None:
            # SGLang picks by architecture; without it, the triple is SGLang's to choose (recorded
            # as None).
            return None, Effective(algorithm, None, None, None, page, backend, graphs_off, running)
        deep = algorithm != "STANDALONE" and model_architecture in DEEP_TREE_ARCHITECTURES
        steps, topk, draft = (5, 4, 8) if deep else (3, 1, 4)
    if "trtllm_mha" in (backend, prefill, decode) and topk is not None and topk > 1:
        return _err("trtllm-topk",
                    "ValueError: trtllm_mha backend only supports topk = 1 for speculative "
                    "decoding."), None
    if args.get("speculative_use_rejection_sampling"):
        if algorithm not in ("EAGLE", "EAGLE3"):
            return _err("rejection-sampling",
                        "NotImplementedError: --speculative-use-rejection-sampling is only "
                        "supported for EAGLE / EAGLE3 / NEXTN, not "
                        f"speculative_algorithm={algorithm}."), None
        if topk != 1:
            return _err("rejection-sampling",
                        "ValueError: --speculative-use-rejection-sampling requires "
                        "--speculative-eagle-topk=1."), None
    if topk is None:
        # steps given, topk not: SGLang compares None > 1 in the page check below.
        return _err("all-three-or-none",
                    "TypeError: '>' not supported between instances of 'NoneType' and "
                    "'int'"), None
    if topk == 1 and steps is not None:
        draft = steps + 1
    tree_backends = ("flashinfer", "fa3", "triton")
    if topk > 1 and page > 1 and backend not in tree_backends:
        return _err("tree-page-size",
                    f"ValueError: speculative_eagle_topk > 1 with page_size > 1 is only "
                    f"supported on {tree_backends}; got attention_backend={backend!r}. Use "
                    "page_size == 1 or one of those backends."), None
    return None, Effective(algorithm, steps, topk, draft, page, backend, graphs_off, running)


def _ngram(args: Mapping[str, Any], topk: int, draft: int | None, steps: int | None, page: int,
           backend: str | None, graphs_off: bool, running: int) -> tuple[RuleViolation | None,
                                                                         Effective | None]:
    """``speculative_hook.py::_handle_ngram``: topk is the BFS breadth, 12 draft tokens, steps =
    draft // topk."""
    draft = 12 if draft is None else int(draft)
    steps = draft // topk if steps is None else int(steps)
    if topk > 1 and page > 1 and backend != "flashinfer":
        return _err("tree-page-size",
                    f"ValueError: speculative_eagle_topk({topk}) > 1 with page_size({page}) > 1 "
                    "is unstable and produces incorrect results for paged attention backends. This "
                    "combination is only supported for the 'flashinfer' backend."), None
    if (args.get("attn_dp_size") or 1) > 1 or args.get("enable_dp_attention"):
        return _err("dp-attention",
                    "ValueError: Currently ngram speculative decoding does not support dp "
                    "attention."), None
    return None, Effective("NGRAM", steps, topk, draft, page, backend, graphs_off, running)


def adaptive_disabled_reason(args: Mapping[str, Any], algorithm: str | None) -> str | None:
    """``adaptive_spec_params.py::adaptive_unsupported_reason``: why SGLang turns
    ``--speculative-adaptive`` off (with a warning, falling back to the static tree) for these
    arguments; None when it stays on. ``algorithm`` is the effective one (NEXTN already EAGLE)."""
    if algorithm not in ("EAGLE", "EAGLE3"):
        return f"speculative_algorithm={algorithm} (only EAGLE/EAGLE3 are supported)"
    topk = args.get("speculative_eagle_topk")
    if topk is not None and topk != 1:
        return f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    if (args.get("attn_dp_size") or 1) > 1 or args.get("enable_dp_attention"):
        return ("attention DP is not supported (adaptive tier decisions are not synchronized "
                "across DP ranks)")
    if args.get("enable_multi_layer_eagle"):
        return ("enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not "
                "implement adaptive)")
    if args.get("enable_two_batch_overlap"):
        return (
            "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the "
            "TboAttnBackend wrapper)")
    if args.get("enable_pdmux"):
        return ("enable_pdmux=True is not supported (adaptive state swap does not update "
                "decode_attn_backend_group)")
    return None
