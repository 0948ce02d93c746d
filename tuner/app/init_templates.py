"""``spectune init --template``: a study over the whole speculative choice for one kind of model
(docs/study.md, "The kind of speculation: branches").

* ``eagle3`` — a model with an EAGLE-3 draft head: a tuned static tree, SGLang's adaptive steps, or
  off;
* ``mtp`` — a model with its own multi-token-prediction head (Qwen3.5, DeepSeek-class, GLM-4.5+):
  NEXTN with a tuned static tree, NEXTN with adaptive steps, or off — no draft model;
* ``ngram`` — no draft model at all: n-gram speculation (its BFS breadth and draft tokens) or off.

Each is the ``speculative-algorithm`` branches, the flags of each branch and a baseline on the first
branch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TREE: dict[str, dict[str, Any]] = {
    "speculative-num-steps": {"min": 1, "max": 8},
    "speculative-eagle-topk": {"choices": [1, 2, 4]},
    "speculative-num-draft-tokens": {"min": 2, "max": 16},
}
MEMORY: dict[str, dict[str, Any]] = {
    "mem-fraction-static": {"min": 0.78, "max": 0.92, "step": 0.02},
    "cuda-graph-max-bs-decode": {"choices": [32, 64, 128]},
}
MEMORY_BASELINE = {"mem-fraction-static": 0.86, "cuda-graph-max-bs-decode": 64}
TREE_BASELINE = {"speculative-num-steps": 3, "speculative-eagle-topk": 1,
                 "speculative-num-draft-tokens": 4}


@dataclass(frozen=True)
class Template:
    description: str
    choices: tuple[str, ...]
    search: dict[str, dict[str, Any]]
    baseline: dict[str, Any]
    draft_model: bool  # whether the file names a draft model
    #: The simulator's profile for this kind of model when none is named.
    simulated_model: str | None = None
    notes: tuple[str, ...] = field(default=())


TEMPLATES: dict[str, Template] = {
    "eagle3": Template(
        "an EAGLE-3 draft head: a tuned static tree vs SGLang's adaptive steps vs no speculation",
        ("EAGLE3", "EAGLE3-adaptive", "off"), {**TREE, **MEMORY},
        {"speculative-algorithm": "EAGLE3", **TREE_BASELINE, **MEMORY_BASELINE}, draft_model=True),
    "mtp": Template(
        "the model's own MTP head (NEXTN, no draft model): a tuned static tree vs SGLang's "
        "adaptive steps vs no speculation", ("NEXTN", "NEXTN-adaptive", "off"), {**TREE, **MEMORY},
        {"speculative-algorithm": "NEXTN", **TREE_BASELINE, **MEMORY_BASELINE}, draft_model=False,
        simulated_model="Qwen/Qwen3.5-35B-A3B"),
    "ngram": Template(
        "no draft model: n-gram speculation (its BFS breadth and draft tokens) vs no speculation",
        ("NGRAM", "off"), {"speculative-num-draft-tokens": {"min": 4, "max": 16, "step": 4},
                           "speculative-ngram-max-bfs-breadth": {"choices": [1, 4, 10]}, **MEMORY},
        # A chain (breadth 1) is valid on every GPU: a wider n-gram tree with paged attention needs
        # flashinfer.
        {"speculative-algorithm": "NGRAM", "speculative-num-draft-tokens": 8,
         "speculative-ngram-max-bfs-breadth": 1, **MEMORY_BASELINE}, draft_model=False),
}


def search_of(template: Template) -> dict[str, dict[str, Any]]:
    return {"speculative-algorithm": {"choices": list(template.choices)}, **template.search}
