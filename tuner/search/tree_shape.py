"""What a draft tree's shape says before any trial runs: one more input of the accept-length model,
and the trees no proposal needs to measure.

Two facts of tree speculation as SGLang runs it (EAGLE's draft tree: ``steps`` draft forward passes,
each widening the tree by top-k, and the verifier taking the ``draft tokens − 1`` most likely
nodes), true whatever the model, the GPU and the workload:

* **Tokens per level decide whether depth or width limits the accept length.** The verified tree is
  at most ``steps`` deep, and its draft − 1 nodes are shared among those levels. More draft tokens
  help while the levels are thinner than top-k lets them be, and add nothing past that; more steps
  help while there are tokens to fill the new level. In the model's raw inputs (steps, top-k, log
  draft tokens) that saturation is a diagonal ridge — the best draft-token count moves with the
  steps — which a GP learns only from many trials; given tokens per level, (draft − 1) ÷ steps, as
  an input beside them, it is a bend along one axis (docs/benchmarks.md, "The default since issue
  14's fifth round": measured with and without). The input is read as min(tokens per level, top-k):
  a level cannot hold more than the beam keeps, so the tokens past it read the same, and the model
  need not learn the bend's far side from trials — which it had spent on trees with twice the draft
  tokens their beam can verify (docs/benchmarks.md, "Tokens per level capped at top-k").
* **A tree with fewer draft tokens than steps + 1 wastes its last steps.** A node is taken only with
  its ancestors (they are at least as likely), so draft − 1 nodes reach at most draft − 1 deep: each
  step beyond costs a forward pass of the draft model and adds no accepted token, and the same tree
  with steps = draft − 1 accepts as much for less. On every bench landscape the best such tree is
  8–31 % below the optimum. The grey-box sampler does not propose one while any other configuration
  is unmeasured (the baseline, the designed start and queued trials may still be one).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuner.sglang.launch import ServerConfig
from tuner.study.space import DRAFT, STEPS, TOPK


def tree_shape(configs: Sequence[ServerConfig]) -> tuple[np.ndarray | None, np.ndarray]:
    """(log tokens per level, at most top-k — None where it is unknown or the same everywhere —, and
    which configurations are shallow: fewer draft tokens than steps + 1), one entry per
    configuration."""
    tree = _tree(configs)
    steps, topk, draft = tree.T
    known = _has_tree(tree)
    shallow = known & (draft - 1 < steps)
    if not len(configs) or not known.any():
        return None, shallow
    # Without a tree (another branch of the speculation choice) a candidate gets the median of those
    # with one.
    per_level = (draft - 1) / np.where(known, steps, 1.0)
    per_level = np.where(topk >= 1, np.minimum(per_level, topk), per_level)  # no top-k: no cap
    per_level = np.log(np.where(known, per_level, 1.0))
    per_level = np.where(known, per_level, float(np.median(per_level[known])))
    if per_level.max() <= per_level.min():
        return None, shallow
    return per_level, shallow


def tree_values(configs: Sequence[ServerConfig]) -> np.ndarray | None:
    """(steps, top-k, draft tokens) per configuration, or None unless every one has a tree."""
    tree = _tree(configs)
    return tree if len(configs) and _has_tree(tree).all() else None


def _tree(configs: Sequence[ServerConfig]) -> np.ndarray:
    """(steps, top-k, draft tokens) per configuration, 0 where a flag is not set."""
    return np.array([[_number(c.get(flag)) for flag in (STEPS, TOPK, DRAFT)] for c in configs],
                    dtype=float).reshape(-1, 3)


def _has_tree(tree: np.ndarray) -> np.ndarray:
    """Which rows of ``_tree`` have a draft tree: steps and more than one draft token."""
    return (tree[:, 0] > 0) & (tree[:, 2] > 1)


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
