"""SGLang 0.5.23's validity rules for speculative decoding, in one place.

Both sides use these: the search space applies them *before* deploying anything (so an invalid point never
costs a restart), and the simulator applies them at startup (so it fails exactly as the real server would).
Messages are SGLang's own text where SGLang has one (reference notes §1).

Arguments are read from a mapping of argparse ``dest`` names to resolved values (``None`` = unset), i.e. what
``vars(parser.parse_args(argv))`` gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

#: Algorithms spectune knows; SGLang upper-cases the name and rejects others.
SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
#: Algorithms that use the draft tree (steps/topk/draft tokens).
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
#: Backends that allow topk > 1 together with page_size > 1.
TREE_WITH_PAGES_BACKENDS = ("flashinfer", "fa3", "triton")
#: Attention backends that can run the draft model (``speculative/draft_utils.py``).
DRAFT_CAPABLE_BACKENDS = (
    "flashinfer", "triton", "fa3", "fa4", "flashmla", "trtllm_mha", "trtllm_mla", "cutedsl_mla", "dsa", "nsa",
    "dsv4", "aiter", "ascend", "intel_amx", "intel_xpu", "hybrid_linear_attn",
)
#: With speculation on and --max-running-requests unset, SGLang caps running requests at this.
SPECULATIVE_MAX_RUNNING_REQUESTS = 48

TOPK1_WARNING = (
    "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
)
MAX_RUNNING_WARNING = (
    "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
    "setting --max-running-requests."
)


@dataclass(frozen=True)
class RuleViolation:
    """A configuration SGLang refuses.

    ``stage`` says when the real server notices: ``startup`` (the process exits before loading weights) or
    ``runtime`` (the server starts, then every request fails — the over-large tree of #5160).
    """

    rule: str
    message: str
    stage: Literal["startup", "runtime"] = "startup"


@dataclass(frozen=True)
class SpeculativeSettings:
    """The resolved draft tree after SGLang's adjustments."""

    algorithm: str | None
    num_steps: int | None
    eagle_topk: int | None
    num_draft_tokens: int | None
    adjustments: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        return self.algorithm is not None


def max_tree_candidates(steps: int, topk: int) -> int:
    """How many candidates the verifier can pick from: ``topk + (steps−1)·topk²`` (eagle_utils.py)."""
    return topk + (steps - 1) * topk * topk


def max_draft_tokens(steps: int, topk: int) -> int:
    """The largest ``--speculative-num-draft-tokens`` that does not fail at runtime (root included)."""
    if topk == 1:
        return steps + 1
    return max_tree_candidates(steps, topk) + 1


def resolve_speculative(args: Mapping[str, Any]) -> SpeculativeSettings:
    """Apply SGLang's defaults and the topk=1 adjustment. Does not judge validity; see ``check``."""
    algorithm = args.get("speculative_algorithm")
    if algorithm is None:
        return SpeculativeSettings(None, None, None, None)
    algorithm = str(algorithm).upper()
    steps = args.get("speculative_num_steps")
    topk = args.get("speculative_eagle_topk")
    draft = args.get("speculative_num_draft_tokens")
    adjustments: list[str] = []
    if algorithm in ("DFLASH", "DSPARK"):
        steps, topk = 1, 1
    if steps is None and topk is None and draft is None and algorithm in EAGLE_FAMILY:
        # Auto-chosen triple for non-Llama models (reference notes §1); the tuner always sets all three.
        steps, topk, draft = 3, 1, 4
    if topk == 1 and steps is not None and draft != steps + 1:
        draft = steps + 1
        adjustments.append(TOPK1_WARNING)
    return SpeculativeSettings(algorithm, steps, topk, draft, tuple(adjustments))


def check(args: Mapping[str, Any]) -> list[RuleViolation]:
    """Every rule ``args`` breaks, in the order SGLang would report them (the first one is what it prints)."""
    algorithm = args.get("speculative_algorithm")
    if algorithm is None:
        return []
    violations: list[RuleViolation] = []
    name = str(algorithm).upper()
    if name not in SPECULATIVE_ALGORITHMS:
        return [RuleViolation("unknown-algorithm", f"Unknown speculative algorithm name: {algorithm}")]

    steps = args.get("speculative_num_steps")
    topk = args.get("speculative_eagle_topk")
    draft = args.get("speculative_num_draft_tokens")
    if name in EAGLE_FAMILY and steps is None and (topk is not None or draft is not None):
        # SGLang fails a bare assert here (speculative_hook.py::_handle_eagle_family).
        violations.append(RuleViolation("all-three-or-none", "AssertionError"))
        return violations
    for dest, value in (("speculative_num_steps", steps), ("speculative_eagle_topk", topk),
                        ("speculative_num_draft_tokens", draft)):
        if value is not None and value < 1:
            violations.append(RuleViolation("positive", f"{dest} must be a positive integer, got {value}"))
    if violations:
        return violations

    resolved = resolve_speculative(args)
    backend = args.get("attention_backend") or args.get("decode_attention_backend")
    page_size = args.get("page_size") or 1
    topk = resolved.eagle_topk or 1

    if backend == "flex_attention":
        violations.append(RuleViolation(
            "flex-attention", "Speculative decoding is currently not supported with Flex Attention backend"))
    if backend == "trtllm_mha" and topk > 1:
        violations.append(RuleViolation(
            "trtllm-topk", "trtllm_mha backend only supports topk = 1 for speculative decoding."))
    if topk > 1 and page_size > 1 and backend is not None and backend not in TREE_WITH_PAGES_BACKENDS:
        violations.append(RuleViolation(
            "tree-page-size",
            f"speculative_eagle_topk > 1 with page_size > 1 is only supported on {TREE_WITH_PAGES_BACKENDS}; "
            f"got attention_backend={backend}",
        ))
    if backend is not None and backend not in DRAFT_CAPABLE_BACKENDS and backend != "flex_attention":
        violations.append(RuleViolation(
            "draft-backend", f"EAGLE is not supported in (decode) attention backend {backend}"))
    if name in ("STANDALONE", "NGRAM") and (args.get("attn_dp_size") or 1) > 1:
        violations.append(RuleViolation(
            "dp-attention",
            f"Currently {name.lower()} speculative decoding does not support dp attention."))

    steps, topk_, draft = resolved.num_steps, resolved.eagle_topk, resolved.num_draft_tokens
    if steps is not None and topk_ is not None and draft and draft > max_draft_tokens(steps, topk_):
        violations.append(RuleViolation("tree-too-large", "selected index k out of range", stage="runtime"))
    return violations


def effective_max_running_requests(args: Mapping[str, Any]) -> int | None:
    """What SGLang will actually allow: the explicit value, 48 under speculation, else None (memory-derived)."""
    explicit = args.get("max_running_requests")
    if explicit is not None:
        return int(explicit)
    if args.get("speculative_algorithm") is not None:
        return SPECULATIVE_MAX_RUNNING_REQUESTS
    return None
