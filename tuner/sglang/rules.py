"""SGLang 0.5.23's validity rules for speculative decoding, in one place: a verdict and the
effective values.

Both sides use these: the search space applies them *before* deploying anything (so an invalid point
never costs a restart, and the trial records what SGLang will really run), and the simulator applies
them at startup (so it fails exactly as the real server would). The startup verdict is
``tuner.sglang.resolution.resolve``, held to the real SGLang by
``tests/fixtures/sglang-0.5.23-fidelity.json``; messages are the last line of the traceback SGLang
prints. On top of it, ``judge`` adds what SGLang only notices at runtime (the over-large draft tree)
and resolves honestly when the GPU is unknown.

Arguments are read from a mapping of argparse ``dest`` names to resolved values (``None`` = unset),
i.e. what ``vars(parser.parse_args(argv))`` gives.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tuner.sglang.hardware import CAPABILITY_FAMILIES, UNKNOWN, Hardware
from tuner.sglang.loading import draft_backend_refusal
from tuner.sglang.resolution import (
    RESOLUTION_INPUTS,
    SPECULATIVE_ALGORITHMS,
    Effective,
    RuleViolation,
    resolve,
)
from tuner.sglang.resolution import adaptive_disabled_reason as _adaptive_reason

__all__ = ["SPECULATIVE_ALGORITHMS", "RuleViolation", "Verdict", "check", "judge"]

#: Algorithms that use the draft tree (steps/topk/draft tokens).
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
#: With speculation on and --max-running-requests unset, SGLang caps running requests at this.
SPECULATIVE_MAX_RUNNING_REQUESTS = 48

TOPK1_WARNING = (
    "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
    "speculative_eagle_topk == 1"
)
MAX_RUNNING_WARNING = (
    "Max running requests is reset to 48 for speculative decoding. You can override this by "
    "explicitly setting --max-running-requests."
)


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
    """How many candidates the verifier can pick from: ``topk + (steps−1)·topk²``
    (eagle_utils.py)."""
    return topk + (steps - 1) * topk * topk


def max_draft_tokens(steps: int, topk: int) -> int:
    """The largest ``--speculative-num-draft-tokens`` that does not fail at runtime (root
    included)."""
    if topk == 1:
        return steps + 1
    return max_tree_candidates(steps, topk) + 1


@dataclass(frozen=True)
class Verdict:
    """SGLang's answer on one command line: refused (``violation``) or the values it runs
    (``effective``).

    ``effective`` maps ``Effective``'s field names to values; ``None`` marks a value SGLang chooses
    from an input spectune does not know (the architecture, the GPU), recorded as unknown rather
    than guessed. ``runtime`` is a configuration SGLang starts but whose every request fails.
    """

    violation: RuleViolation | None
    effective: dict[str, Any] | None
    runtime: RuleViolation | None = None

    @property
    def refused(self) -> RuleViolation | None:
        """What makes the configuration unusable: the startup error, else the runtime one."""
        return self.violation or self.runtime


#: The study-file keys that tell spectune the GPU (named in the refusal when a verdict depends on
#: it).
GPU_KEYS = "[target] gpu or [target] compute_capability"


def judge(args: Mapping[str, Any], hardware: Hardware = UNKNOWN, *,
          loading: bool = True) -> Verdict:
    """SGLang's verdict on ``args`` for ``hardware``; an unknown GPU is resolved for every GPU
    family."""
    # Cached by the arguments SGLang's resolution reads: a search space enumerates 10⁵ points, which
    # differ mostly in flags (memory, graphs, scheduling) that do not enter it.
    inputs = tuple(repr(args.get(k)) for k in RESOLUTION_INPUTS)
    verdict = _judge_inputs(inputs, hardware, loading)
    return Verdict(verdict.violation, dict(verdict.effective) if verdict.effective is not None
                   else None, verdict.runtime)


@lru_cache(maxsize=65536)
def _judge_inputs(inputs: tuple[str, ...], hardware: Hardware, loading: bool = True) -> Verdict:
    args = {k: ast.literal_eval(v) for k, v in zip(RESOLUTION_INPUTS, inputs, strict=True)}
    if hardware.compute_capability is not None:
        violation, effective = _resolve_and_load(args, hardware.model_architecture,
                                                 hardware.compute_capability, loading)
        return _with_runtime(violation, _values(effective))
    outcomes = [_resolve_and_load(args, hardware.model_architecture, cap, loading)
                for cap in CAPABILITY_FAMILIES]
    messages = {v.message for v, _ in outcomes if v is not None}
    if len(messages) == 1 and all(v is not None for v, _ in outcomes):
        return Verdict(outcomes[0][0], None)
    if messages:
        refusal = next(v for v, _ in outcomes if v is not None)
        return Verdict(RuleViolation("hardware-unknown", (
            f"whether SGLang accepts this configuration depends on the GPU (on some it exits with "
            f"{refusal.message!r}); set {GPU_KEYS} in the study file")), None)
    values = [_values(e) or {} for _, e in outcomes]
    # A value that differs between GPU families is SGLang's choice on a GPU we do not know: unknown.
    merged = {k: (v if all(other[k] == v for other in values) else None) for k,
              v in values[0].items()}
    return _with_runtime(None, merged)


def _resolve_and_load(args: Mapping[str, Any], architecture: str | None,
                      capability: tuple[int, int],
                      loading: bool = True) -> tuple[RuleViolation | None, Effective | None]:
    """SGLang's argument checks (``resolve``), then what it refuses while loading
    (tuner/sglang/loading.py)."""
    violation, effective = resolve(args, model_architecture=architecture,
                                   compute_capability=capability)
    if loading and violation is None and effective is not None:
        refused = draft_backend_refusal(args, vars(effective))
        if refused is not None:
            return refused, None
    return violation, effective


def _values(effective: Effective | None) -> dict[str, Any] | None:
    return None if effective is None else dict(vars(effective))


def _with_runtime(violation: RuleViolation | None, effective: dict[str, Any] | None) -> Verdict:
    if effective is None:
        return Verdict(violation, None)
    steps, topk, draft = (effective["speculative_num_steps"], effective["speculative_eagle_topk"],
                          effective["speculative_num_draft_tokens"])
    runtime = None
    if (effective["speculative_algorithm"] in EAGLE_FAMILY and steps and topk and draft
            and draft > max_draft_tokens(steps, topk)):
        runtime = RuleViolation("tree-too-large", "selected index k out of range", stage="runtime")
    return Verdict(violation, effective, runtime)


def check(args: Mapping[str, Any], hardware: Hardware = UNKNOWN) -> list[RuleViolation]:
    """The rules ``args`` breaks: the startup error SGLang exits with, then a runtime failure (if
    any)."""
    verdict = judge(args, hardware)
    return [v for v in (verdict.violation, verdict.runtime) if v is not None]


def resolve_speculative(args: Mapping[str, Any],
                        hardware: Hardware = UNKNOWN) -> SpeculativeSettings:
    """The draft tree SGLang runs (after its auto-choice and adjustments); empty when refused or
    off."""
    verdict = judge(args, hardware)
    eff = verdict.effective
    if verdict.violation is not None or eff is None or eff["speculative_algorithm"] is None:
        return SpeculativeSettings(None, None, None, None)
    steps, topk, draft = (eff["speculative_num_steps"], eff["speculative_eagle_topk"],
                          eff["speculative_num_draft_tokens"])
    given = args.get("speculative_num_draft_tokens")
    adjustments = (TOPK1_WARNING,) if topk == 1 and given is not None and given != draft else ()
    return SpeculativeSettings(eff["speculative_algorithm"], steps, topk, draft, adjustments)


def adaptive_disabled_reason(args: Mapping[str, Any], effective: Mapping[str, Any]) -> str | None:
    """Why SGLang turns ``--speculative-adaptive`` off for ``args`` (a warning, then the static
    tree), or None."""
    return _adaptive_reason(args, effective.get("speculative_algorithm"))


def effective_max_running_requests(args: Mapping[str, Any]) -> int | None:
    """What SGLang will actually allow: the explicit value, 48 under speculation, else None
    (memory-derived)."""
    explicit = args.get("max_running_requests")
    if explicit is not None:
        return int(explicit)
    if args.get("speculative_algorithm") is not None:
        return SPECULATIVE_MAX_RUNNING_REQUESTS
    return None
