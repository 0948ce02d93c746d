"""The kinds of speculation one study can compare, as branches of a conditional search space.

``speculative-algorithm = { choices = ["EAGLE3", "EAGLE3-adaptive", "NGRAM", "off"] }`` in
``[search]`` makes the algorithm the first parameter of every trial (Optuna's define-by-run:
``SearchSpace.suggest`` asks it first) and every other tuned flag a parameter of the branches it
applies to only (docs/study-file.md, "Branches"):

* a static draft tree (EAGLE, EAGLE3, NEXTN, STANDALONE, ...): the tree flags (steps, top-k, draft
  tokens) and every other ``--speculative-*`` flag;
* ``<ALGO>-adaptive`` (EAGLE, EAGLE3, NEXTN: what SGLang's adaptive steps run on):
  ``--speculative-algorithm ALGO --speculative-adaptive``; SGLang picks the steps per batch size at
  runtime, so the tree flags do not apply (``--speculative-adaptive-config`` does);
* ``NGRAM``: its own ``--speculative-ngram-*`` flags and ``--speculative-num-draft-tokens`` (how
  many tokens it verifies); no draft model, so no draft-model flags;
* ``off``: no ``--speculative-*`` flag at all.

Flags that are not speculative (memory, graphs, scheduling) apply on every branch. A fixed
``[server.flags]`` flag that does not apply on a branch is left out of that branch's command line
(the draft model path on NGRAM).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from tuner.study.dimensions import Dimension
from tuner.study.spec import SPECULATION_OFF

ALGORITHM = "--speculative-algorithm"
ADAPTIVE = "--speculative-adaptive"
ADAPTIVE_CONFIG = "--speculative-adaptive-config"
ADAPTIVE_SUFFIX = "-adaptive"
TREE_FLAGS = ("--speculative-num-steps", "--speculative-eagle-topk",
              "--speculative-num-draft-tokens")
DRAFT_TOKENS = "--speculative-num-draft-tokens"
NGRAM_PREFIX = "--speculative-ngram-"
#: What SGLang's adaptive steps run on (adaptive_spec_params.py; NEXTN is EAGLE by then).
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")
#: Algorithms with a draft tree the tree flags shape.
TREE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
#: Algorithms without a separate draft model: the model's own MTP layers, or the text so far.
NO_DRAFT_MODEL = ("NEXTN", "NGRAM")
DRAFT_MODEL_FLAGS = ("--speculative-draft-model-path", "--speculative-draft-model-revision",
                     "--speculative-draft-load-format")


#: A trial parameter (and user attribute) that runs one of SGLang's own choices beside the tuning —
#: its adaptive steps or no speculation — on any space, with or without branches (``[study]
#: compare``).
REFERENCE = "reference"
REFERENCE_KINDS = ("adaptive", "off")
#: The user attribute of a reference trial outside the space (its kind is then the ``reference``
#: parameter).
OUTSIDE = "reference_outside_space"


class BranchKind(StrEnum):
    STATIC = "static"  # a static draft tree (or an algorithm's own fixed scheme)
    ADAPTIVE = "adaptive"  # SGLang's adaptive steps
    NGRAM = "ngram"
    OFF = "off"


@dataclass(frozen=True)
class Branch:
    """One choice of ``speculative-algorithm`` as the study file spells it."""

    choice: str
    algorithm: str | None  # the --speculative-algorithm value (None: off)
    kind: BranchKind

    @property
    def label(self) -> str:
        return self.choice


def branch_of(choice: object) -> Branch:
    text = str(choice)
    if text == SPECULATION_OFF:
        return Branch(text, None, BranchKind.OFF)
    if text.endswith(ADAPTIVE_SUFFIX):
        return Branch(text, text[: -len(ADAPTIVE_SUFFIX)], BranchKind.ADAPTIVE)
    if text.upper() == "NGRAM":
        return Branch(text, text, BranchKind.NGRAM)
    return Branch(text, text, BranchKind.STATIC)


def reference_branch(kind: str, algorithm: str) -> Branch:
    """The branch a reference trial runs: SGLang's adaptive steps on ``algorithm``, or speculation
    off."""
    if kind == "adaptive":
        return Branch(f"{algorithm}{ADAPTIVE_SUFFIX}", algorithm, BranchKind.ADAPTIVE)
    return Branch(SPECULATION_OFF, None, BranchKind.OFF)


def choice_problem(choice: object) -> str | None:
    """What is wrong with one ``speculative-algorithm`` choice's branch spelling (None: fine)."""
    branch = branch_of(choice)
    if (branch.kind is BranchKind.ADAPTIVE
        and str(branch.algorithm).upper() not in ADAPTIVE_ALGORITHMS):
        return (f"{branch.choice!r}: SGLang's adaptive steps run on "
                f"{', '.join(ADAPTIVE_ALGORITHMS)} only "
                "(write e.g. 'EAGLE3-adaptive')")
    return None


def applies(flag: str, branch: Branch) -> bool:
    """Whether ``flag`` is part of ``branch``'s command lines (and so of its parameters)."""
    if flag == ALGORITHM:
        return branch.kind is not BranchKind.OFF
    if not flag.startswith("--speculative-"):
        return True
    if branch.kind is BranchKind.OFF:
        return False
    algorithm = str(branch.algorithm).upper()
    if flag in (ADAPTIVE, ADAPTIVE_CONFIG):
        return branch.kind is BranchKind.ADAPTIVE
    if flag.startswith(NGRAM_PREFIX):
        return branch.kind is BranchKind.NGRAM
    if flag in DRAFT_MODEL_FLAGS:
        return algorithm not in NO_DRAFT_MODEL
    if flag in TREE_FLAGS:
        if branch.kind is BranchKind.NGRAM:
            return flag == DRAFT_TOKENS
        return branch.kind is BranchKind.STATIC and algorithm in TREE_ALGORITHMS
    return branch.kind is not BranchKind.NGRAM


@dataclass(frozen=True)
class BranchTable:
    """A space's branches as its points ask for them, worked out once per space."""

    #: Each ``speculative-algorithm`` choice's branch, in the study file's order (empty: the
    #: algorithm is not tuned among choices).
    branches: tuple[Branch, ...]
    by_choice: Mapping[str, Branch]
    #: The EAGLE-family algorithm SGLang's adaptive steps would run for this study (fixed, or the
    #: first such choice), or None: the study has no EAGLE-family draft, and no reference trials.
    reference_algorithm: str | None
    #: The branch of each of SGLang's own choices by kind ("adaptive", "off"), with a reference
    #: algorithm only.
    references: Mapping[str, Branch]
    #: Of the flags the space can set, those that apply on each branch above (choices and
    #: references).
    flags_on: Mapping[Branch, frozenset[str]]
    #: The dimensions proposed on each branch above, the algorithm first.
    dims_on: Mapping[Branch, tuple[Dimension, ...]]


def branch_table(algorithm: Dimension | None, dimensions: Sequence[Dimension],
                 fixed_algorithm: object | None, fixed_flags: Collection[str]) -> BranchTable:
    """The branches of a space's ``dimensions``: one per choice of ``algorithm`` (none where it is
    not tuned among choices), with ``fixed_algorithm`` the ``[server.flags]`` algorithm, if any,
    and ``fixed_flags`` the flags ``[server.flags]`` sets."""
    own = tuple(branch_of(c) for c in algorithm.choices) if algorithm is not None else ()
    candidates = ([fixed_algorithm] if fixed_algorithm is not None
                  else [b.algorithm for b in own if b.kind is BranchKind.STATIC])
    reference = next((str(c) for c in candidates if str(c).upper() in ADAPTIVE_ALGORITHMS), None)
    references = {kind: reference_branch(kind, reference)
                  for kind in REFERENCE_KINDS} if reference is not None else {}
    flags = {*fixed_flags, *(d.flag for d in dimensions), DRAFT_TOKENS}
    flags_on = {b: frozenset(f for f in flags if applies(f, b))
                for b in (*own, *references.values())}
    lead = (algorithm,) if algorithm is not None else ()
    dims_on = {b: (*lead, *(d for d in dimensions if d is not algorithm and d.flag in on))
               for b, on in flags_on.items()}
    return BranchTable(own, {b.choice: b for b in own}, reference, references, flags_on, dims_on)
