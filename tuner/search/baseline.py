"""The baseline runs first: the server's current configuration, measured once per study, defines a
score of 1.0. Then a designed start: a few generic draft-tree shapes around it, instead of the
sampler's random start-up points.

Here, below the commands, so that `spectune tune`, the bench's landscapes
(tuner/evaluation/landscape.py) and the tests all start a study the same way.

Why a designed start (docs/benchmarks.md, "What was tried", and "The default since issue 14's fourth
round"): in this product's spaces the score is decided mostly by the draft tree (steps × topk ×
draft tokens), and random start-up points spend their trials on memory and scheduling flags, many of
which fail to start. Five shapes span the tree's range — a wide tree of middle depth with two
draft-token counts, a short chain (top-k 1, which decides on a small model or a throughput-heavy
mix), a deep wide tree with many draft tokens, and the deepest widest tree with CUDA-graph headroom
— each with the baseline's other flags, so the sampler's first model sees the tree's main
directions, and its trust region starts in the right basin. Where a phase of many requests is
weighted, the wide tree with few draft tokens runs at the largest static fraction, which asks
whether memory is what limits that phase (``largest_pool``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import TrialState

from tuner.core.errors import SpectuneError
from tuner.core.faults import fault_point
from tuner.search.references import comparison_points, shape_bases
from tuner.store.keys import Key, StudyKey
from tuner.store.optuna_private import replace_waiting_pop, storage_of, study_id_of, trial_id_of
from tuner.store.storage import MAX_RETRIES, params_of, retry_attrs
from tuner.study.dimensions import Dimension
from tuner.study.proposal import Located, Proposal
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec

#: The wide shapes' top-k sits three quarters up its range: the widest of a short range (1, 2, 4 →
#: 4), the widest but one of a long one (1, 2, 4, 8 → 4). Under a mix with many running requests
#: every branch is verified for each of them, and on the long-prompt MoE landscape on the Llama
#: space (docs/benchmarks.md) a start whose every wide tree had top-k 8 never left it (0.860 of the
#: optimum at 20 trials; 0.968 from top-k 4). The widest is still measured: by the headroom shape,
#: and by a branched space's start, which has no headroom shape.
WIDE = 0.75
#: Tree shapes as positions in each tree dimension's range (0 = its first value, 1 = its last):
#: (steps, topk, draft tokens within what the tree can verify, the CUDA-graph batch size — None: the
#: baseline's). Every other tuned flag keeps the baseline's value (but see ``POOL_SHAPE``). The
#: first two are one tree with two draft-token counts: every other shape moves steps and draft
#: tokens together, and without this pair the models cannot tell their effects apart (the
#: spread_roofline landscape, docs/benchmarks.md). The last shape is the deepest widest tree with a
#: smaller graph: capture memory grows with graph size × draft tokens, so a big tree that fails at
#: the baseline's graph size may start at a smaller one (where no graph size is tuned, the static
#: memory fraction is lowered instead: that is what leaves room for capture).
DESIGNED_SHAPES: tuple[tuple[float, float, float, float | None], ...] = (
    (0.5, WIDE, 0.5, None), (0.5, WIDE, 0.2, None), (0.15, 0.0, 1.0, None),
    (0.85, WIDE, 0.6, None), (1.0, 1.0, 0.5, 0.2))
#: How many of the shapes a space with branches (tuner/study/branches.py) starts with.
BRANCHED_SHAPES = 3
#: The shape that runs at the largest static fraction where a phase of many requests is weighted
#: (``largest_pool``): the wide tree with few draft tokens, the least memory beside the pool — with
#: a running-request cap that admits that batch.
POOL_SHAPE = 1
_TREE = ("speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens")
#: What the headroom position moves: the CUDA-graph batch sizes, or the static memory fraction
#: without them.
_GRAPH_FLAGS = frozenset({"cuda-graph-max-bs", "cuda-graph-max-bs-decode"})
_STATIC_FLAGS = frozenset({"mem-fraction-static"})
#: The running-request cap the pool point raises to admit the batch (``admitting_the_batch``).
_RUNNING_FLAGS = frozenset({"max-running-requests"})


def enqueue_baseline(study: optuna.Study, space: SearchSpace, spec: StudySpec, *,
                     designed: bool = True, outside: bool = True) -> None:
    """Queue the baseline, then the designed start, once per study (not once per resume or worker).

    Enqueue first, mark after: a kill between the two leaves the baseline queued and the next start
    only marks it (the study has a trial then), while the reverse order would leave a study marked
    as having a baseline that was never queued — and 1.0 would be whatever configuration ran first.
    Check-then-set: callers on a shared study hold the study's ``baseline`` mutex
    (tuner/workers/coordination.py)."""
    if not spec.baseline or study.user_attrs.get(StudyKey.BASELINE_ENQUEUED):
        return
    if not study.get_trials(deepcopy=False):
        at = space.locate(space.encode(spec.baseline))
        # the designed start, then the branch starts and SGLang's own choices (``outside``: also
        # those outside the space, tuner/search/references.py)
        points: list[tuple[Proposal, dict[str, Any]]] = [
            (p, {}) for p in (designed_start(space, at) if designed else [])]
        points += comparison_points(space, spec, at, outside=outside)
        study.enqueue_trial(at.params, user_attrs={Key.BASELINE: True, **_proposed(at.proposal)})
        fault_point("after_baseline_enqueue")
        # (a kill here loses only the designed start: the sampler's own start-up points take its
        # place)
        for proposal, attrs in points:
            study.enqueue_trial(proposal.params, user_attrs={**attrs, **_proposed(proposal)})
    study.set_user_attr(StudyKey.BASELINE_ENQUEUED, True)


def _proposed(proposal: Proposal | None) -> dict[str, Any]:
    """The flag values a queued point proposes, as an attribute: what ``trials`` and ``trial N``
    show of a trial still waiting (it has not been proposed yet, and its parameters are the space's
    encoding)."""
    return {Key.PARAMS_DECODED: dict(proposal.values)} if proposal and proposal.values else {}


class BaselineNotMeasured(SpectuneError):
    """The baseline was interrupted on every retry and never measured: the study stops rather than
    let another configuration define 1.0 (exit 6)."""

    exit_code = 6


def keep_the_baseline(study: optuna.Study, spec: StudySpec) -> None:
    """Stop the study — queue the baseline once more for the next run, and raise
    ``BaselineNotMeasured`` — when the baseline ended FAIL on every retry (each interrupted) and
    none is left queued or measured.

    Without it the next trial, a designed-start point, would measure first and fix the references:
    every score would then mean "compared with that point", not "compared with what the server runs
    today", and nothing would say so. Running the same command again is the answer to the question
    this asks: the baseline is measured first then. (Leaving out [baseline] scores against the first
    measured trial instead, said loudly.)
    """
    if not spec.baseline:
        return
    trials = study.get_trials(deepcopy=False)
    ours = [t for t in trials if t.user_attrs.get(Key.BASELINE)]
    if not ours or any(t.state != TrialState.FAIL for t in ours):
        return  # none queued yet, or one is measured, queued or running
    last = ours[-1]
    study.enqueue_trial(params_of(last), user_attrs=retry_attrs(last))
    raise BaselineNotMeasured(
        f"the baseline (trial {ours[0].number}) was interrupted {len(ours)} times and never "
        "measured; the study stops rather than score against another configuration (after "
        f"{MAX_RETRIES} retries). It "
        "is queued again: run the same command to measure it first (or remove [baseline] to score "
        "against the first measured trial)")


def baseline_runs_first(study: optuna.Study) -> None:
    """Until the baseline has a measurement, ``study``'s ``ask`` takes a queued baseline before
    anything else queued; then the re-runs of interrupted trials.

    A baseline interrupted mid-measurement is queued again behind the designed start (a kill between
    writing the references and the baseline's result, issue 12 item 6); taken in queue order, the
    first design point would fix the references instead and 1.0 would not be the baseline. Only the
    order changes — which queued trial ``ask`` takes — so nothing is written that a kill could leave
    half done. Optuna's own order (oldest first) otherwise; its private ``_pop_waiting_trial_id`` is
    replaced on this instance only (tests/unit/search/test_baseline_first.py holds it to Optuna's
    behaviour)."""
    storage = storage_of(study)

    def pop() -> int | None:
        trials = storage.get_all_trials(study_id_of(study), deepcopy=False)
        waiting = [t for t in trials if t.state == TrialState.WAITING]
        baseline_measured = any(t.state == TrialState.COMPLETE and t.user_attrs.get(Key.BASELINE)
                                for t in trials)
        # stable sort, oldest first otherwise: the baseline until it is measured, then the re-runs
        # of interrupted trials ("re-run on resume" — behind the rest of the queue, a study that
        # reached n_trials first left them waiting for good)
        waiting.sort(key=lambda t: (baseline_measured or not t.user_attrs.get(Key.BASELINE),
                                    t.user_attrs.get(Key.RETRY_OF) is None))
        for trial in waiting:
            try:  # as Optuna: another worker may take or finish it first
                if storage.set_trial_state_values(trial_id_of(trial), state=TrialState.RUNNING):
                    return trial_id_of(trial)
            except optuna.exceptions.UpdateFinishedTrialError:
                continue
        return None

    replace_waiting_pop(study, pop)


def designed_start(space: SearchSpace, at: Located) -> list[Proposal]:
    """``DESIGNED_SHAPES`` applied to the tree dimensions the space tunes (and to the headroom
    flags), the baseline's values elsewhere (or a tree branch's start, ``shape_bases``); shapes that
    decode to the baseline or to each other, or are rejected, are left out. Empty without a tuned
    tree. ``at``: the baseline, as ``SearchSpace.locate`` found it."""
    bases = [(dims, params) for dims, params in shape_bases(space, at)
             if any(d.name.split(".")[0] in _TREE for d in dims)]
    if not bases:
        return []
    shapes = _shaped(space, bases)
    pool = largest_pool(space, shapes[POOL_SHAPE]) if len(shapes) > POOL_SHAPE else None
    if pool is not None:
        shapes[POOL_SHAPE] = pool
    # one question to the space for all of them; a shape is kept when it is valid and new
    seen = {_key(at.proposal) if at.proposal is not None else None}
    out = []
    for proposal in space.decode_all(shapes):
        key = _key(proposal)
        if key is not None and key not in seen:
            seen.add(key)
            out.append(proposal)
    return out


def _shaped(space: SearchSpace, bases: Sequence[tuple[Sequence[Dimension], Mapping[str, Any]]]
            ) -> list[dict[str, Any]]:
    """Each shape's parameters, valid or not: the shapes take turns among ``bases`` (several
    draft-tree branches)."""
    # With branches the start must not sink a quarter of a short study into the baseline's branch,
    # which may be the dominated one: the first shapes only (one tree, two draft-token counts, and a
    # short chain).
    out = []
    for i, shape in enumerate(DESIGNED_SHAPES[:BRANCHED_SHAPES] if space.branches
                              else DESIGNED_SHAPES):
        dims, base = bases[i % len(bases)]
        if space.branches and shape[1] == WIDE:  # no headroom shape here to measure the widest
            shape = (shape[0], 1.0, *shape[2:])
        params = dict(base)
        flags = {d.name.split(".")[0] for d in dims}
        headroom = (_GRAPH_FLAGS & flags) or (_STATIC_FLAGS & flags)
        for d in dims:
            flag = d.name.split(".")[0]
            tree = flag in _TREE
            position = shape[_TREE.index(flag)] if tree else shape[3] if flag in headroom else None
            if position is not None:
                values = d.encoded_values()
                value = values[round(position * (len(values) - 1))]
                if not tree and _larger(d.decode(value), d.decode(params[d.name])):
                    continue  # headroom never means more graph memory than the baseline's
                params[d.name] = value
        out.append(params)
    return out


def largest_pool(space: SearchSpace, shape: Mapping[str, Any]) -> dict[str, Any] | None:
    """``shape`` at the largest static memory fraction: the largest KV pool the space allows, with a
    running-request cap that admits the batch (``admitting_the_batch``). None without a tuned static
    fraction, in a space with branches, or where no phase of more than one request is weighted (a
    C=1 phase never fills the pool).

    Why: with long prompts or many running requests, a C=64 phase is decided by how many requests
    the KV pool holds — fewer than are admitted, and SGLang retracts requests mid-decode and
    prefills them again; fewer are admitted, and the rest queue. That is a cliff in two flags at
    once (the static fraction and the running-request cap), and the models cannot extrapolate it
    from trials that all keep the baseline's fraction: the long-prompt MoE landscape
    (docs/benchmarks.md) settled at 0.90 of its optimum, queueing a quarter of the batch at a
    middling fraction, because every trial it had at the full cap was at the baseline's fraction
    and evicted. One trial at the top of the range, with a tree light on memory beside the pool
    (graph capture and decode activations grow with the draft tokens), shows whether memory is what
    limits the batch.

    It is the second shape moved, not a point added: an extra trial in every study cost the
    landscapes where memory does not limit C=64 their 10-trial figure (spread_roofline 0.957 →
    0.948), while the pair's purpose — telling the draft tokens' effect from the steps' — is kept
    by the accept-length model, which reads the tree alone (spread_roofline: 0.964 at 10 trials with
    the pair moved). Where the top fraction does not start, that trial is a failed start-up, and the
    models learn the memory limit from it.
    """
    if space.branches or not any(c > 1 and w > 0 for c, w in space.spec.objective.weights.items()):
        return None
    fraction = _dimension(space, _STATIC_FLAGS)
    if fraction is None:
        return None
    return {**shape, fraction.name: _by_value(fraction)[-1], **admitting_the_batch(space, shape)}


def admitting_the_batch(space: SearchSpace, params: Mapping[str, Any]) -> dict[str, Any]:
    """The running-request cap that admits the largest weighted batch, where ``params`` cap it
    below that batch: the smallest tuned value at least as large (the largest, if none is); else
    nothing.

    Why: the pool point asks whether memory limits the C=64 batch, and a cap below the batch
    answers "no" whatever the pool holds — the rest of the batch queues. Started from a baseline
    capped at 48 running requests, the long-prompt MoE landscape settled at 0.902 of its optimum
    (0/16 seeds at 0.98 by 20 trials), and at 0.979 (7/16) with the cap raised at the pool point
    (docs/benchmarks.md)."""
    weighted = [c for c, w in space.spec.objective.weights.items() if w > 0]
    running = _dimension(space, _RUNNING_FLAGS)
    if not weighted or running is None or running.name not in params:
        return {}
    batch = max(weighted)
    current = running.decode(params[running.name])
    if not isinstance(current, int | float) or current >= batch:
        return {}  # the server's own choice (unset), or enough already
    values = _by_value(running)
    cap = next((v for v in values if _number(running.decode(v)) >= batch), values[-1])
    return {running.name: cap} if _number(running.decode(cap)) > current else {}


def _dimension(space: SearchSpace, flags: frozenset[str]) -> Dimension | None:
    """The space's dimension of one of ``flags`` (names without dashes), if it tunes one."""
    return next((d for d in space.dimensions if d.name.split(".")[0] in flags), None)


def _by_value(dimension: Dimension) -> list[Any]:
    """``dimension``'s encoded values, smallest decoded value first (whatever order a list of
    choices was written in)."""
    return sorted(dimension.encoded_values(), key=lambda v: _number(dimension.decode(v)))


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else float("-inf")


def _larger(a: object, b: object) -> bool:
    return isinstance(a, int | float) and isinstance(b, int | float) and a > b


def _key(proposal: Proposal) -> str | None:
    """By the flags, not SGLang's effective values: two shapes SGLang runs alike are both kept."""
    return proposal.config.key() if proposal.config is not None else None
