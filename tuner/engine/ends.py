"""The two ends of every run of a study: the baseline is queued first, the best trial is picked at the end.

Here, below the commands, so that `spectune tune`, `spectune deploy --best`, the bench's landscapes
(tuner/engine/landscape.py) and the tests all start and pick the same way.
"""

from __future__ import annotations

from collections.abc import Iterable

import optuna
from optuna.trial import FrozenTrial

from tuner.engine.loop import measured_trials
from tuner.engine.trial import OUTCOME
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec


def best_trial(study: optuna.Study) -> FrozenTrial | None:
    """The feasible, fully measured trial with the highest score (single objective)."""
    return best_of(measured_trials(study))


def best_of(trials: Iterable[FrozenTrial]) -> FrozenTrial | None:
    """``best_trial`` among ``trials`` (e.g. the first N measured: what the study would have picked then)."""
    candidates = [t for t in trials if t.user_attrs.get(OUTCOME) == "measured"
                  and not t.user_attrs.get("skipped_phases") and all(v <= 0 for v in (t.constraints or {}).values())]
    return max(candidates, key=lambda t: t.user_attrs.get("score", float("-inf")), default=None)


def enqueue_baseline(study: optuna.Study, space: SearchSpace, spec: StudySpec) -> None:
    """The server's current configuration runs first, once per study (not once per resume or worker).

    Check-then-set: callers on a shared study hold the study's ``baseline`` mutex (tuner/workers/coordination.py)."""
    if not spec.baseline or study.user_attrs.get("baseline_enqueued"):
        return
    study.set_user_attr("baseline_enqueued", True)
    if study.get_trials(deepcopy=False):
        return
    study.enqueue_trial(space.encode(spec.baseline), user_attrs={"baseline": True})
