"""What decoding points of a search space gives (tuner/study/space.py): one point's proposal, a
configuration's identity by what SGLang runs, the count over many points, and where a known point
stands among the branches.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuner.sglang.launch import FlagValue, ServerConfig
from tuner.study.branches import Branch
from tuner.study.dimensions import Dimension

STEPS = "--speculative-num-steps"
TOPK = "--speculative-eagle-topk"
DRAFT = "--speculative-num-draft-tokens"
ALGORITHM = "--speculative-algorithm"
MAX_RUNNING = "--max-running-requests"
#: Each effective value and the flag it replaces in a configuration's key (None: kept when unknown).
EFFECTIVE_FLAGS = {
    "speculative_algorithm": ALGORITHM, "speculative_num_steps": STEPS,
    "speculative_eagle_topk": TOPK,
    "speculative_num_draft_tokens": DRAFT, "page_size": "--page-size",
    "attention_backend": "--attention-backend",
    "cuda_graph_disabled": "--disable-cuda-graph", "max_running_requests": MAX_RUNNING,
    # Known only from the target's own SGLang (tuner/targets/resolver.py): aiter scales it by 0.85.
    "mem_fraction_static": "--mem-fraction-static",
}


@dataclass(frozen=True)
class Proposal:
    """The outcome of decoding one point: a deployable config, or the reason it is not
    deployable."""

    params: dict[str, Any]
    values: dict[str, FlagValue]
    config: ServerConfig | None
    repairs: tuple[str, ...] = ()
    reason: str | None = None
    #: What SGLang will run (``tuner.sglang.rules.Verdict.effective``; None values: SGLang's choice,
    #: unknown).
    effective: dict[str, Any] | None = None
    #: Identifies the deployment by its effective values (``effective_key``); None when rejected.
    key: str | None = None

    @property
    def rejected(self) -> bool:
        return self.config is None

    @property
    def identity(self) -> str | None:
        """What spots a configuration met before: ``key``, or its flags where SGLang's effective
        values are not known; None when rejected."""
        if self.config is None:
            return None
        return self.key or self.config.key()


@dataclass
class SpaceSummary:
    total_points: int
    examined: int = 0
    valid: int = 0
    distinct: set[str] = field(default_factory=set)
    rejections: Counter[str] = field(default_factory=Counter)

    @property
    def complete(self) -> bool:
        return self.examined == self.total_points

    @property
    def distinct_valid(self) -> int:
        return len(self.distinct)

    def top_rejections(self, n: int) -> list[tuple[str, int]]:
        return self.rejections.most_common(n)


@dataclass(frozen=True)
class Located:
    """A known point (the baseline's parameters) as its space sees it, with the dimensions of every
    branch it could be carried to: what a study's first trials are built from, in one value, so
    that building them asks the space only whether they are valid (``SearchSpace.locate``)."""

    params: dict[str, Any]
    #: Whether the point gives every dimension of its branch (of the space, without branches).
    covers: bool
    #: The branch the point names (None: a space without branches, or no algorithm among its
    #: parameters).
    branch: Branch | None
    #: The dimensions proposed around it: its branch's when it covers one, else all of the space's.
    dims: tuple[Dimension, ...]
    #: Each branch of the space with its dimensions, the algorithm first (empty without branches).
    dims_of: Mapping[Branch, tuple[Dimension, ...]]
    #: The dimensions of SGLang's own choices measured beside the tuning (``[study] compare``) by
    #: kind ("adaptive", "off"); empty where the study has no EAGLE-family draft.
    reference_dims: Mapping[str, tuple[Dimension, ...]]
    #: The EAGLE-family algorithm SGLang's adaptive steps would run (None: no reference trials).
    reference_algorithm: str | None
    #: The point decoded (None: it does not give every dimension of its branch).
    proposal: Proposal | None


def effective_key(config: ServerConfig, effective: dict[str, Any]) -> str:
    """A configuration's identity by what SGLang runs: its flags, those SGLang resolves replaced by
    the effective values (a flag is kept where its effective value is unknown), and its
    environment."""
    known = {k: v for k, v in effective.items() if v is not None}
    replaced = {EFFECTIVE_FLAGS[k] for k in known if k in EFFECTIVE_FLAGS}
    flags = [[name, value] for name, value in config.flags if name not in replaced]
    return json.dumps({"flags": flags, "effective": known, "env": config.env}, sort_keys=True,
                      default=str)
