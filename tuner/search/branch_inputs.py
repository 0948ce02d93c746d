"""Model inputs of a space with branches (tuner/study/branches.py): a flag that does not apply on a
candidate's branch (the draft tree with speculation off, NGRAM's breadth on EAGLE3) has no value
there.

The grey-box sampler's models need a number in every column. A missing value takes the column's
lowest value present — a constant, so within a branch the column says nothing, and the branch's own
one-hot columns (the ``speculative-algorithm`` choices, which the accept-length model also reads)
tell the branches apart. This is the usual imputation for conditional spaces (as SMAC does); the
trust region then keeps proposals in the incumbent's branch until its box is measured out
(tuner/search/trust_region.py).

What decides a configuration's accept length is the kind of speculation (the algorithm), its draft
tree and a branch's *own* flags — those that apply on some branches only, such as NGRAM's BFS
breadth: they are how that branch speculates. All of them are inputs of the accept-length model.
Before they were (only the tree flags and the algorithm were), the model could not tell NGRAM's
breadth 1 from breadth 4 — at 17 draft tokens they accept 8.3 and 4.7 tokens a step on the
repetitive landscape, and the model predicted one value for both —, so the search inside the NGRAM
branch spent over a third of its trials on other breadths and stopped at 0.92–0.98 of the optimum
(docs/benchmarks.md, "Spaces with branches").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuner.study.branches import applies
from tuner.study.dimensions import Dimension
from tuner.study.space import SearchSpace


def filled(d: Dimension, values: Sequence[Mapping[str, Any]]) -> list[Any]:
    """``d``'s flag value per candidate, a missing one replaced by the lowest present (numbers) or
    the first."""
    raw = [v.get(d.flag) for v in values]
    present = [r for r in raw if r is not None]
    if len(present) == len(raw) or not present:
        return raw
    numeric = [r for r in present if isinstance(r, int | float) and not isinstance(r, bool)]
    neutral = min(numeric) if len(numeric) == len(present) else present[0]
    return [neutral if r is None else r for r in raw]


def own_flag(space: SearchSpace, flag: str) -> bool:
    """Whether ``flag`` belongs to some of ``space``'s branches only (never without branches)."""
    return bool(space.branches) and not all(applies(flag, b) for b in space.branches)
