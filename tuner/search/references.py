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
from tuner.study.dimensions import Dimension
from tuner.study.proposal import Located, Proposal
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


def comparison_points(space: SearchSpace, spec: StudySpec, at: Located, *, outside: bool = True
                      ) -> list[tuple[Proposal, dict[str, Any]]]:
    """(proposal, user attributes) of the branch starts and references to queue, in order
    (``outside=False``: none outside the space — a bench landscape models the space's configurations
    only). ``at``: the baseline, as ``SearchSpace.locate`` found it."""
    reference = at.reference_algorithm
    wanted = [k for k in spec.study.compare if reference is not None]
    covered: set[str] = set()
    points: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for branch in space.branches:
        if at.branch is not None and branch.choice == at.branch.choice:
            continue
        kind = reference_kind(branch)
        attrs: dict[str, Any] = {}
        if kind in wanted and str(branch.algorithm or reference) == reference:
            attrs[Key.REFERENCE] = kind
            covered.add(kind)
        points.append((_start(space, at, branch), attrs))
    for kind in wanted:
        if kind in covered or not outside:
            continue
        params = {**at.params, branches.REFERENCE: kind}
        if space.algorithm is not None:
            params[space.algorithm.name] = next(b.choice for b in space.branches
                                                if b.algorithm == reference)
        names = {d.name for d in at.reference_dims[kind]}
        params = {k: v for k, v in params.items() if k == branches.REFERENCE or k in names}
        points.append((params, {Key.REFERENCE: kind, branches.OUTSIDE: True}))
    # one question to the space for all of them: which are valid
    valid = space.decode_all(params for params, _ in points)
    return [(proposal, attrs) for (_, attrs), proposal in zip(points, valid, strict=True)
            if proposal.config is not None]


def shape_bases(space: SearchSpace, at: Located
                ) -> list[tuple[tuple[Dimension, ...], dict[str, Any]]]:
    """Where the designed start's shapes begin, in turn (each with its branch's dimensions): the
    baseline (located at ``at``) alone without branches; with two or more static draft-tree
    branches (NEXTN and EAGLE3 ...) the baseline, then each other such branch's start, so every tree
    branch's shapes are seen before the sampler chooses; and where the baseline's branch has no
    tree (n-gram, adaptive, off) but the space has tree branches, those branches' starts alone.

    Why the last: on the Llama space with an n-gram baseline the shapes stayed on NGRAM (its draft
    tokens at 8, 17 and 32: three trials of a branch at 0.37–0.48 of the optimum), EAGLE3 got only
    its branch start (a middle tree) and never the short chain, and the search ended on a local
    optimum below 0.98 in two seeds of eight (bench/branch_efficiency.py)."""
    own = (at.dims, at.params)
    if space.algorithm is None or not at.covers or at.branch is None:
        return [own]
    trees = [b for b in space.branches if b.kind is BranchKind.STATIC
             and str(b.algorithm).upper() in branches.TREE_ALGORITHMS]
    others = [(at.dims_of[b], _start(space, at, b)) for b in trees if b != at.branch]
    if at.branch in trees:
        return [own, *others] if others else [own]
    return others or [own]


def _start(space: SearchSpace, at: Located, branch: Branch) -> dict[str, Any]:
    assert space.algorithm is not None
    params: dict[str, Any] = {space.algorithm.name: branch.choice}
    own, baseline = at.branch, at.params
    for d in at.dims_of[branch][1:]:
        values = d.encoded_values()
        # A tree flag means another thing on another kind of branch (NGRAM's draft tokens): its
        # middle there.
        keep = d.name in baseline and (own is None or own.kind is branch.kind
                                       or d.flag not in branches.TREE_FLAGS)
        params[d.name] = baseline[d.name] if keep else values[round(MIDDLE * (len(values) - 1))]
    return params
