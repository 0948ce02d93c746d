"""What a study measures besides its tuning: one point per branch of the speculation choice, and
SGLang's own choices — its adaptive steps and no speculation — once each, so the answer can say how
the tuned winner compares with what SGLang would do untuned (``[study] compare``,
docs/study-file.md).

Both are queued right after the designed start (tuner/search/baseline.py), so they run early and
count towards ``n_trials`` like every trial that uses the server:

* **branch starts** (a space with branches, tuner/study/branches.py): for every branch but the
  baseline's, the baseline's values where a flag applies on that branch and the middle of its range
  where the flag is the branch's own (NGRAM's breadth and draft tokens). The models then see every
  branch once before the sampler chooses, and a dominated branch costs one trial, not a random
  share;
* **references**: on a study with an EAGLE-family draft (EAGLE, EAGLE3, NEXTN), SGLang's adaptive
  steps (``--speculative-adaptive``, the tree flags left to it) and speculation off, each with the
  baseline's other flags. Where a branch start already is one (an ``EAGLE3-adaptive`` or ``off``
  branch), it is tagged instead of measured twice. A reference trial carries ``Key.REFERENCE``; on a
  space without branches it is outside the space (the ``reference`` parameter), so the sampler's
  models never see it.
"""

from __future__ import annotations

from typing import Any

from tuner.store.keys import Key
from tuner.study import branches
from tuner.study.branches import Branch, BranchKind
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec

#: Where a branch's own flags start: the middle of their range.
MIDDLE = 0.5


def reference_kind(branch: Branch | None) -> str | None:
    if branch is not None and branch.kind is BranchKind.ADAPTIVE:
        return "adaptive"
    if branch is not None and branch.kind is BranchKind.OFF:
        return "off"
    return None


def comparison_points(space: SearchSpace, spec: StudySpec, baseline: dict[str, Any], *,
                      outside: bool = True
                      ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(parameters, user attributes) of the branch starts and references to queue, in order
    (``outside=False``: none outside the space — a bench landscape models the space's configurations
    only)."""
    out: list[tuple[dict[str, Any], dict[str, Any]]] = []
    wanted = [k for k in spec.study.compare if space.reference_algorithm() is not None]
    covered: set[str] = set()
    own = (space.branch(baseline) if space.algorithm is not None
           and space.algorithm.name in baseline else None)
    for branch in space.branches:
        if own is not None and branch.choice == own.choice:
            continue
        params = _start(space, branch, baseline)
        kind = reference_kind(branch)
        attrs: dict[str, Any] = {}
        if kind in wanted and str(branch.algorithm
                                  or space.reference_algorithm()) == space.reference_algorithm():
            attrs[Key.REFERENCE] = kind
            covered.add(kind)
        if params is not None and space.decode(params).config is not None:
            out.append((params, attrs))
    for kind in wanted:
        if kind in covered or not outside:
            continue
        params = {**baseline, branches.REFERENCE: kind}
        if space.algorithm is not None:
            params[space.algorithm.name] = next(b.choice for b in space.branches
                                                if b.algorithm == space.reference_algorithm())
        params = {k: v for k, v in params.items() if k == branches.REFERENCE
                  or k in {d.name for d in space.active(space.branch(params))}}
        if space.decode(params).config is not None:
            out.append((params, {Key.REFERENCE: kind, branches.OUTSIDE: True}))
    return out


def tree_branch_starts(space: SearchSpace, baseline: dict[str, Any]) -> list[dict[str, Any]]:
    """With two or more static draft-tree branches (NEXTN and EAGLE3 ...): the baseline, then each
    other such branch's start — the designed start's shapes take turns among them, so every tree
    branch's shapes are seen before the sampler chooses (empty otherwise: the shapes stay on the
    baseline's branch)."""
    if space.algorithm is None or not space.covers(baseline):
        return []
    own = space.branch(baseline)
    trees = [b for b in space.branches if b.kind is BranchKind.STATIC
             and str(b.algorithm).upper() in branches.TREE_ALGORITHMS]
    if own is None or own not in trees or len(trees) < 2:
        return []
    return [baseline, *(_start(space, b, baseline) for b in trees if b != own)]


def _start(space: SearchSpace, branch: Branch, baseline: dict[str, Any]) -> dict[str, Any]:
    assert space.algorithm is not None
    params: dict[str, Any] = {space.algorithm.name: branch.choice}
    own = space.branch(baseline) if space.algorithm.name in baseline else None
    for d in space.active(branch)[1:]:
        values = d.encoded_values()
        # A tree flag means another thing on another kind of branch (NGRAM's draft tokens): its
        # middle there.
        keep = d.name in baseline and (own is None or own.kind is branch.kind
                                       or d.flag not in branches.TREE_FLAGS)
        params[d.name] = baseline[d.name] if keep else values[round(MIDDLE * (len(values) - 1))]
    return params
