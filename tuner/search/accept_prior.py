"""A draft tree's accept length as a three-number formula: the mean the accept-length model's GP
starts from, so that five or ten trials extrapolate along the physics rather than towards the
average.

Why (docs/benchmarks.md, "The accept length's prior"): fitted to the designed start and a few
proposals, a GP with a constant mean predicts a top-k the start never measured (a middle one: 2 of
1, 2, 4) from its neighbours in the inputs; on a landscape whose optimum is that top-k
(bench/landscapes/expert_traffic.py) it predicted the optimum's accept length 17 % low after ten
trials (3.16 against 3.81; with the formula 3.55) with ±9 % of uncertainty, so expected
improvement never went there, and every search stayed at the baseline.

Speculative decoding's acceptance has a known shape, whatever the model and the workload:

* each level of the verified tree holds the target's token with some probability p, higher for a
  wider level: p = 1 − (1 − a)^(k^b) for top-k k (k candidates, not independent: b ≤ 1);
* a tree is as deep as its steps allow, and as its draft tokens fill: D = min(steps, (draft − 1) ÷
  k^c) — the verify budget spread over levels of up to k nodes (c = 0: the budget goes down the
  likeliest branch, as SGLang's selection of the draft − 1 likeliest nodes does for a confident
  draft model; c = 1: a beam's);
* the accepted length is 1 + p + p² + … + p^D (the bonus token, then each level only if all before
  it held), continuous in D.

The three numbers (a, b, c) are fitted to the measured accept lengths by least squares with a
weak pull (``PULL``) towards ``CENTRE``; the GP models what the formula misses. c is pulled to 0,
not to the middle: where the trees measured cannot tell (the designed start's top-k 4 trees accept
as much with 5 draft tokens as with 9), a c too small proposes trees with few draft tokens, whose
measurement corrects it, while a c too large proposes trees with draft tokens they do not need, and
nothing measured corrects it (on the landscape of docs/benchmarks.md's example, 0.95 of the
optimum after 12 trials instead of 0.99, pulled to 0.5). Tried and dropped (docs/benchmarks.md):
a level's width read as its share of the draft tokens, at most top-k (the simulator's own law),
alone or chosen by the better fit — the demo's space gained, the beam landscapes lost all but one
seed. With fewer than ``MIN_TREES`` distinct trees measured, or without a tree for every
candidate, there is no prior.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

#: Distinct trees measured before the formula is fitted (three numbers need more than three).
MIN_TREES = 4
#: The ranges of (a, b, c), and where the weak prior pulls them.
LOWER = np.array([0.05, 0.0, 0.0])
UPPER = np.array([0.97, 1.0, 1.0])
CENTRE = np.array([0.7, 0.5, 0.0])
#: Where the fit starts: inside the bounds (a start on one, c = 0, stays there).
START = np.array([0.7, 0.5, 0.5])
#: How hard: residuals in log accept length, so 0.05 ≈ a 5 % miss per unit of distance.
PULL = 0.05


def accept_length(theta: np.ndarray, tree: np.ndarray) -> np.ndarray:
    """The formula's accept length for each row of ``tree`` (steps, top-k, draft tokens)."""
    a, b, c = theta
    steps, topk, draft = tree[:, 0], np.maximum(tree[:, 1], 1.0), tree[:, 2]
    depth = np.clip(np.minimum(steps, (draft - 1.0) / topk ** c), 0.0, None)
    # below 1 by a margin: a wide top-k (16 at b = 1) rounds p to 1.0, and the sum to 0 ÷ 0
    p = np.minimum(1.0 - (1.0 - a) ** (topk ** b), 1.0 - 1e-9)
    return (1.0 - p ** (depth + 1.0)) / (1.0 - p)


@dataclass(frozen=True)
class AcceptPrior:
    theta: np.ndarray

    def log_accept(self, tree: np.ndarray) -> np.ndarray:
        return np.log(accept_length(self.theta, tree))


def fit_prior(tree: np.ndarray | None, log_accept: np.ndarray) -> AcceptPrior | None:
    """The formula fitted to measured accept lengths (``tree``: their steps, top-k, draft tokens),
    or None where too few distinct trees were measured."""
    if tree is None or len({tuple(row) for row in tree}) < MIN_TREES:
        return None

    def residuals(theta: np.ndarray) -> np.ndarray:
        fitted = np.log(accept_length(theta, tree))
        return np.concatenate([fitted - log_accept, PULL * (theta - CENTRE)])

    return AcceptPrior(least_squares(residuals, START, bounds=(LOWER, UPPER)).x)
