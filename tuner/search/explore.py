"""What to try after the sampler proposes a configuration that was already measured.

Bayesian samplers converge: once the model is confident, its favourite point is often one already
measured (several encoded points also decode to one configuration: topk=1 forces the draft tokens).
Re-proposing it costs nothing (the result is copied, tuner/run/trial.py), but it teaches the sampler
nothing either, and a sampler that keeps proposing it would end the study as "exhausted" with budget
left. So after such a repeat the loop queues an unmeasured *neighbour* of it — one step along one
tuned flag — which is exactly where the model believes the optimum is and where it is least sure of
the exact spot. The neighbour runs as an ordinary trial (Optuna's ``enqueue_trial``), so the sampler
learns from it like from its own proposals.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import TrialState

from tuner.store.keys import Key
from tuner.store.optuna_private import queued_params
from tuner.store.record import records
from tuner.study.space import SearchSpace


def neighbours(space: SearchSpace, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Points one step away along one dimension (the next rung of a ladder, ± one integer step, the
    other choices of a categorical), in a fixed order."""
    out = []
    for d in space.dimensions:
        if d.name not in params:
            continue
        values = d.encoded_values()
        current = params[d.name]
        if d.encoding == "categorical":
            candidates = [v for v in values if v != current]
        else:
            candidates = [v for v in (current - d.step, current + d.step) if d.low <= v <= d.high]
        out += [dict(params, **{d.name: v}) for v in candidates]
    return out


def known_keys(study: optuna.Study) -> set[str]:
    """Configurations that are measured, failed to start, in flight or already queued."""
    return {r.config_key for r in records(study)
            if r.config_key is not None and r.state != TrialState.FAIL}


def queue_unexplored_neighbour(study: optuna.Study, space: SearchSpace,
                               repeated: optuna.trial.FrozenTrial,
                               seed: int | None) -> dict[str, Any] | None:
    """Enqueue a random unmeasured, deployable neighbour of ``repeated``'s point; returns its
    parameters, or None when every neighbour is known (then the sampler's next proposal is left to
    itself)."""
    known = known_keys(study)
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    queued = [queued_params(t) for t in waiting]
    candidates = []
    for params in neighbours(space, repeated.params):
        proposal = space.decode(params)
        if proposal.config is None or proposal.key in known or params in queued:
            continue
        candidates.append(params)
    if not candidates:
        return None
    choice = random.Random(f"{seed}:{repeated.number}").choice(candidates)
    study.enqueue_trial(choice, user_attrs={Key.NEIGHBOUR_OF: repeated.number})
    return choice
