"""The baseline runs first: the server's current configuration, measured once per study, defines a score of 1.0.

Here, below the commands, so that `spectune tune`, the bench's landscapes (tuner/engine/landscape.py) and the
tests all start a study the same way.
"""

from __future__ import annotations

import optuna

from tuner.core.faults import fault_point
from tuner.engine.record import Key, StudyKey
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec


def enqueue_baseline(study: optuna.Study, space: SearchSpace, spec: StudySpec) -> None:
    """Queue the baseline once per study (not once per resume or worker).

    Enqueue first, mark after: a kill between the two leaves the baseline queued and the next start only
    marks it (the study has a trial then), while the reverse order would leave a study marked as having a
    baseline that was never queued — and 1.0 would be whatever configuration ran first.
    Check-then-set: callers on a shared study hold the study's ``baseline`` mutex (tuner/workers/coordination.py)."""
    if not spec.baseline or study.user_attrs.get(StudyKey.BASELINE_ENQUEUED):
        return
    if not study.get_trials(deepcopy=False):
        study.enqueue_trial(space.encode(spec.baseline), user_attrs={Key.BASELINE: True})
        fault_point("after_baseline_enqueue")
    study.set_user_attr(StudyKey.BASELINE_ENQUEUED, True)
