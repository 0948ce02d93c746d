"""The grey-box sampler in a space with branches (tuner/study/branches.py): no proposal on a branch
that cannot win, a branch that can win but trails gets its own flags tried
(``untried_own_flags``), the best trial is tried on every branch that shares its inputs
(``untried_twin``), and a branch that does not lead keeps a fifth of the trials (``over_share``).

The trust region (tuner/search/trust_region.py) is a box around the best trial; its algorithm input
is one-hot, so the box spans every branch where the other inputs agree (the best tree, tried on
another kind), and expected improvement picks among them. That box is where a dominated branch
receives trials: on a repetitive workload where NGRAM leads by 1.7×, EAGLE3 points next to the
leader kept a small improvement estimate and took 41 % of the budget (docs/benchmarks.md, "Spaces
with branches"). So a branch stops receiving trials once it is clear it cannot win, by either of two
signs:
- its optimistic bound (the composed score at the models' mean + 2 σ, times its probability of being
  feasible, the best over its open candidates) is below the best score measured — the per-branch
  upper confidence bound of GP-UCB, used to stop, not to choose;
- it has been measured ``MIN_TRIALS`` times, its best is under ``HOLD`` of the best score measured,
  and its best times its own spread (best ÷ median of its trials: the room refinement has shown on
  that branch) still falls short of the best score. The models' bound alone is slow to say so (on
  that landscape, after a dozen trials, the 2 σ bound of a branch at 0.65 of the optimum still
  reached 1.3× the best score: the models share one kernel across branches). The spread term guards
  a branch whose first trials were poor but varied: on the bench landscapes a branch's true best was
  1.0–1.5× the best of its first three trials, and a branch whose trials already vary that much is
  kept. A near-tie (a branch within ``HOLD`` of the best) is never stopped this way: which of the
  two wins is then a question for more trials, not for a rule.

Tried and not kept (bench/branch_efficiency.py, 3 seeds): a box per branch around each branch's own
best trial (68 % of the MTP near-tie's trials on NEXTN: the EAGLE-3 head no longer got the leader's
tree), that plus the leader's box (52 %), and choosing the branch with the highest bound first (the
MTP case never reached 0.98).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

#: A branch measured this many times ...
MIN_TRIALS = 3
#: ... whose best is under this share of the best score measured is not proposed again.
HOLD = 0.85
#: A branch that does not lead takes a next trial only while its trials stay within this share of
#: the study's (``over_share``).
SHARE = 0.2


def still_winnable(labels: np.ndarray, rows: np.ndarray, bound: np.ndarray,
                   ranked: Sequence[tuple[float, int]]) -> np.ndarray:
    """Which of ``rows`` (candidate rows, their optimistic score ``bound``) lie on a branch
    (``labels``: each candidate's) that can still win against ``ranked`` (measured (score, row),
    best first). Where no bound reaches the best score, the rows of every branch its measured trials
    have not stopped; where those stopped every branch, every row (nothing else is left to
    propose)."""
    if not ranked or not len(labels):  # nothing measured yet, or a table without branch labels
        return np.ones(len(rows), dtype=bool)
    best = ranked[0][0]
    keep = np.zeros(len(rows), dtype=bool)
    open_branches = np.zeros(len(rows), dtype=bool)  # not stopped by their measured trials
    for label in np.unique(labels[rows]):
        mine = labels[rows] == label
        if not _stopped(labels, label, ranked):
            open_branches |= mine
            if bound[mine].max() >= best:
                keep |= mine
    # No bound reaches the best (every estimate of improvement is near zero): still not on a stopped
    # branch.
    return (keep if keep.any() else open_branches if open_branches.any()
            else np.ones(len(rows), dtype=bool))


def _stopped(labels: np.ndarray, label: object, ranked: Sequence[tuple[float, int]]) -> bool:
    """Whether the measured trials of branch ``label`` show it cannot win (``MIN_TRIALS`` of them,
    their best under ``HOLD`` of the best score, and not saved by their spread)."""
    measured = [score for score, row in ranked if labels[row] == label]
    # The branch's own spread (best ÷ median) is the room refinement has shown there: its best
    # times that must still fall short of the best score.
    return (len(measured) >= MIN_TRIALS and measured[0] < HOLD * ranked[0][0]
            and measured[0] ** 2 / float(np.median(measured)) < ranked[0][0])


def untried_own_flags(labels: np.ndarray, x: np.ndarray, rungs: np.ndarray,
                      ranked: Sequence[tuple[float, int]], open_rows: np.ndarray
                      ) -> np.ndarray | None:
    """Where to propose first (a mask over candidates, or None: nowhere in particular): on a branch
    that can still win — its best within ``HOLD`` of the best score — but does not lead, its best
    trial with one of its own flags (the inputs only its candidates vary, such as NGRAM's breadth)
    moved to its lowest, middle or highest value, while one of those is unmeasured on the branch.

    Why: the models cannot learn a flag they have seen at one or two values. A branch's start
    measures its own flags at one value (the middle of their ranges, tuner/search/references.py),
    so a branch that ties the leader there looks no better elsewhere in its own flags, and the box
    around the leader (another branch) keeps the proposals: on the repetitive landscape NGRAM's
    start (breadth 4) tied EAGLE3's short chain, the sampler refined EAGLE3 for seven trials and
    measured breadth 1 (the optimum's) at trial 15. One more value chosen by expected improvement
    was not enough (breadth 10, then breadth 1 at the fewest draft tokens, where every breadth
    ties: 0.58 of the optimum at 25 trials); this one-factor design around the branch's best is.
    The leader's branch is left to the trust region around its best (with the design there too,
    tree flags of the leading EAGLE3 branch were moved to their ends: 0.990 instead of 1.000 on the
    chat landscape)."""
    if not ranked or len(np.unique(labels)) < 2:
        return None
    best, seen = ranked[0][0], {labels[ranked[0][1]]}  # not the leader's branch
    for score, row in ranked:  # each other branch at its best trial, the best first
        if score < HOLD * best:
            break
        if labels[row] in seen:
            continue
        seen.add(labels[row])
        mine = labels == labels[row]
        measured = [r for _, r in ranked if labels[r] == labels[row]]
        for j in range(x.shape[1]):
            if np.ptp(x[~mine, j]) > 0 or np.ptp(x[mine, j]) == 0:
                continue  # not this branch's own input
            top = rungs[mine, j].max()
            untried = {0.0, float(np.round(top / 2)), top} - set(rungs[measured, j].tolist())
            others = np.delete(np.arange(x.shape[1]), j)
            moved = (open_rows & mine & np.isin(rungs[:, j], list(untried))
                     & (np.abs(x[:, others] - x[row, others]) <= 1e-9).all(1))
            if moved.any():
                return moved
    return None


def over_share(labels: np.ndarray, x: np.ndarray, known: Sequence[int],
               ranked: Sequence[tuple[float, int]]) -> np.ndarray | None:
    """The candidates of branches that do not lead, have lost to the leader's branch on the same
    inputs and have had their share of the trials (a mask over candidates, or None: no branch
    has): a branch other than the best trial's, measured at twins (``untried_twin``) of trials on
    the leader's branch and scored below them on the whole (the mean log ratio: one pair can flip
    with the noise of two measurements), whose known trials (measured, failed or running: each a
    server start) number ``MIN_TRIALS`` or more and would pass ``SHARE`` of the study's with one
    more.

    Why: a near-tie — a branch within ``HOLD`` of the best, never stopped by ``still_winnable`` —
    keeps an improvement estimate as high as the leader's twins in the box around the best (the
    models share one kernel across branches): on the MTP space NEXTN, 0.973 of the optimum with
    2 % noise, took 36 % of the trials while EAGLE3 held the optimum (with ``untried_twin`` alone
    20–40 %, by seeds and objective; 20 % with both). Whichever of the two leads is refined; the
    other keeps a fifth of the trials, enough to overtake if it can. Only a branch that lost where
    the comparison is the branch's alone is held back: a branch that shares no inputs with the
    leader's (NGRAM beside a draft tree) may need refinement of its own to show what it can do, and
    a branch with fewer than ``MIN_TRIALS`` trials (its start, its own flags' design) is not held
    back either."""
    if not ranked or not len(labels) or len(np.unique(labels)) < 2:
        return None
    leader = labels[ranked[0][1]]
    counts = Counter(labels[row] for row in known)
    total = len(known)
    inputs = _inputs(labels, x)
    scores = np.log(np.maximum([score for score, _ in ranked], 1e-12))
    rows = np.array([row for _, row in ranked])
    on_leader = labels[rows] == leader
    held = []
    for label, n in counts.items():
        if (label == leader or n < MIN_TRIALS or n + 1 <= SHARE * (total + 1)
                or not np.array_equal(inputs[label], inputs[leader])):
            continue
        mine = labels[rows] == label
        # every (its trial, the leader's branch's trial) pair at the same point
        same = (np.abs(x[rows[mine]][:, None, inputs[label]]
                       - x[rows[on_leader]][None, :, inputs[label]]) <= 1e-9).all(2)
        ratios = (scores[mine][:, None] - scores[on_leader][None, :])[same]
        if ratios.size and ratios.sum() < 0:
            held.append(label)
    return np.isin(labels, np.asarray(held)) if held else None


def _inputs(labels: np.ndarray, x: np.ndarray) -> dict[object, np.ndarray]:
    """Each branch's inputs (a mask over columns): those its candidates vary. Two branches with the
    same inputs are twins (an MTP head and an EAGLE-3 head on one tree); a flag that does not apply
    on a branch is a constant there (tuner/search/branch_inputs.py), so a branch without the tree
    (n-gram, off) is no twin of one with it, even where the constant equals the tree's value."""
    return {label: np.ptp(x[labels == label], axis=0) > 0 for label in np.unique(labels)}


def untried_twin(labels: np.ndarray, x: np.ndarray, ranked: Sequence[tuple[float, int]],
                 open_rows: np.ndarray) -> np.ndarray | None:
    """Where to propose first (a mask over candidates, or None): the best trial's twins — the same
    value on every input but the branch — on each branch with the same inputs (``_inputs``) that its
    trials have not stopped (``still_winnable``) and that has not measured it.

    Why: two branches that share a tree (an MTP head and an EAGLE-3 head, say) are compared most
    cheaply at the same point, where the difference is the branch's alone; elsewhere it is mixed
    with the tree's and with 2 % noise. On the MTP space NEXTN's designed tree led from the fourth
    trial while the same tree on EAGLE3 (unmeasured) was 3 % better, and the sampler refined NEXTN
    for ten trials before trying EAGLE3 there (EAGLE3's two trials so far, on other trees, were
    under ``HOLD`` of it)."""
    if not ranked or len(np.unique(labels)) < 2:
        return None
    leader = ranked[0][1]
    inputs = _inputs(labels, x)
    mine = inputs[labels[leader]]
    close = [label for label in np.unique(labels)
             if label != labels[leader] and np.array_equal(inputs[label], mine)
             and not _stopped(labels, label, ranked)]
    if not close or not mine.any():
        return None
    twins = (open_rows & np.isin(labels, np.asarray(close))
             & (np.abs(x[:, mine] - x[leader, mine]) <= 1e-9).all(1))
    return twins if twins.any() else None
