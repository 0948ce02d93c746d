"""Where the grey-box sampler may propose: a box around the best trial, measured in rungs of each
input.

Why (docs/benchmarks.md, "The default since issue 14's fourth round"): at 10–20 trials, expected
improvement over the whole space spends most proposals on corners the models know least (one step
with top-k 4 and two draft tokens, the lowest memory fraction with the most running requests),
because five or ten trials leave every far corner uncertain. Searching near the incumbent, as
trust-region Bayesian optimisation does (TuRBO: Eriksson et al., NeurIPS 2019), turns those trials
into refinements of the tree and the memory flags around what already works; the designed start
(tuner/search/baseline.py) is what puts the incumbent in the right basin.

Distances are in rungs, not in the models' [0, 1] inputs: a flag with three values moves half its
range in one rung, a draft-token count one thirty-first, and a box of ± a fraction of the range
would either freeze the first or let the second jump. Every input may move at least one rung, so the
box is never a single point. ``radius`` is a share of each input's rungs (0.2: steps ± 2 of 8, draft
tokens ± 6 of 31, one rung of a three-valued choice), doubled after every ``STALL`` proposals that
found nothing better.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: The box's half-width as a share of each input's rungs.
RADIUS = 0.2
#: The box doubles after this many of the sampler's own trials without a new best (TuRBO grows its
#: box on successes and shrinks it on failures to converge; here the budget is too short to
#: converge, and a stall is the sign that the incumbent's basin is measured out): twice, and it
#: spans every rung of most inputs.
STALL = 6


def radius(stall: int) -> float:
    """The box's half-width after ``stall`` trials without a new best."""
    return RADIUS * 2.0 ** (stall // STALL)


def rung_table(x: np.ndarray) -> np.ndarray:
    """Each candidate's rung (0, 1, …: the rank of its value among the input's distinct values) per
    input."""
    if x.size == 0:
        return np.zeros(x.shape)
    return np.stack([np.unique(x[:, j], return_inverse=True)[1].reshape(-1)
                     for j in range(x.shape[1])],
                    axis=1).astype(float)


def within(rungs: np.ndarray, centre: int, radius: float = RADIUS) -> np.ndarray:
    """Which candidates lie within ``radius`` (a share of each input's rungs, at least one rung) of
    row ``centre``."""
    inside = np.ones(len(rungs), dtype=bool)
    for j in range(rungs.shape[1]):
        levels = float(rungs[:, j].max())
        if levels <= 0:
            continue  # an input every candidate shares
        allowed = max(1, math.ceil(radius * levels - 1e-9))
        inside &= np.abs(rungs[:, j] - rungs[centre, j]) <= allowed
    return inside


def one_flag_at_a_time(x: np.ndarray, centre: int, flags: Sequence[Sequence[int]]) -> np.ndarray:
    """Which candidates differ from row ``centre`` in at most one of ``flags`` (each a flag's input
    columns): the memory and scheduling flags, while the tree's flags move freely.

    Used once a configuration inside the box has failed for memory or crashed under load
    (tuner/search/greybox.py). Those flags act through cliffs — out of memory at capture or in
    decode, eager decoding above the captured batch, requests retracted when the KV pool is short,
    queueing below the running cap — that smooth models cannot place, and a proposal that moves the
    graph size, the running cap and the static fraction at once and lands past one of them says
    nothing about which flag did it. One at a time, every trial answers one question. The tree is
    free: its accept length is modelled from its shape (tuner/search/tree_shape.py), and its
    optimum often needs steps, top-k and draft tokens moved together. Where nothing failed (a
    landscape whose gains are two memory flags at their ranges' ends) the box is left whole.
    """
    moved = np.zeros(len(x), dtype=int)
    for columns in flags:
        cols = list(columns)
        moved += (np.abs(x[:, cols] - x[centre, cols]) > 1e-9).any(axis=1)
    return moved <= 1
