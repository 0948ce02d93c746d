"""A trial's score within its study: ``objectives.scoring.Scorer`` over the study's references.

``objectives.scoring`` defines the formula (docs/scoring.md); this module is where the study's side
of it lives — the references a score of 1.0 stands for, which the first fully measured trial (the
baseline runs first) fixes once (``fix_references`` is their only writer), and the value stored for
a trial whose weighted phase was skipped. The trial runner, the confirmation stage and the ranking
all score through here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import optuna
from optuna.trial import TrialState

from objectives.scoring import (
    Judged,
    PhaseMetrics,
    Scorer,
    judge,
    phase_value,
    references_from,
)
from objectives.spec import ConstraintSpec
from tuner.core.faults import fault_point
from tuner.store.keys import Key, StudyKey
from tuner.store.phases import decode_phases
from tuner.store.record import Outcome, TrialRecord

log = logging.getLogger(__name__)


def stored_references(study: optuna.Study) -> dict[int, float]:
    """The references stored on ``study`` (empty before its first full measurement, and when the
    trial they came from did not end COMPLETE: a kill after they were written and before the trial's
    result was)."""
    return _decode(_valid(study))


def fix_references(study: optuna.Study, metrics: PhaseMetrics, weights: Mapping[int, float],
                   trial: int | None = None) -> dict[int, float]:
    """Store ``metrics``' primary values as the study's references unless it has valid ones already
    (or a weighted phase of ``metrics`` has no usable value); the references in force afterwards.

    Written before the trial that measured them is COMPLETE (its own score needs them), so the
    number of that trial is written first: should the trial then fail or be killed, the references
    are no longer valid and its re-measurement writes them again (``_valid``) — 1.0 is always a
    stored, complete measurement."""
    stored = _valid(study)
    if stored is None:
        refs = references_from(metrics, weights)
        if refs is not None:
            encoded = {str(c): v for c, v in refs.items()}
            if trial is not None:
                _say_if_not_the_baseline(study, trial)
                study.set_user_attr(StudyKey.REFERENCES_TRIAL, trial)
            fault_point("between_references")
            study.set_user_attr(StudyKey.REFERENCES, encoded)
            stored = encoded  # what was just written, should the storage not show it yet
    return _decode(stored)


def _say_if_not_the_baseline(study: optuna.Study, trial: int) -> None:
    """Loudly, when a study with a baseline gets its references from another trial (the baseline
    failed to start, or measured nothing usable): from now on 1.0 is that trial, not what the server
    runs today."""
    trials = study.get_trials(deepcopy=False)
    baselines = [t.number for t in trials if t.user_attrs.get(Key.BASELINE)]
    if baselines and trial not in baselines:
        log.warning("warning: score 1.0 is trial %d's measurement, not the baseline's (trial %d "
                    "measured nothing usable): scores compare with trial %d, not with what the "
                    "server runs today",
                    trial, baselines[-1], trial)


def _valid(study: optuna.Study) -> Mapping[str, Any] | None:
    attrs = study.user_attrs
    stored = attrs.get(StudyKey.REFERENCES)
    owner = attrs.get(StudyKey.REFERENCES_TRIAL)
    if stored is None or owner is None:
        return stored  # none yet, or written by a version that did not record their trial
    trials = study.get_trials(deepcopy=False)
    # RUNNING: the trial writing them now. A later number: a newer trial's write, half done (trial
    # first).
    if owner < len(trials) and trials[owner].state in (TrialState.COMPLETE, TrialState.RUNNING):
        return stored
    return None


def reference_phases(study: optuna.Study, number: int,
                     metrics: PhaseMetrics) -> PhaseMetrics | None:
    """The phases of the run the study's references come from — ``metrics`` themselves when trial
    ``number`` is that run — for pairing a trial's requests with the reference's
    (objectives/paired.py); None when the study has no valid references yet."""
    if _valid(study) is None:
        return None
    owner = study.user_attrs.get(StudyKey.REFERENCES_TRIAL)
    if owner is None:
        return None
    if owner == number:
        return metrics
    trials = study.get_trials(deepcopy=False)
    if not 0 <= owner < len(trials):
        return None
    return decode_phases(trials[owner].user_attrs.get(Key.PHASES))


def study_scorer(study: optuna.Study, weights: Mapping[int, float]) -> Scorer:
    return Scorer(weights, stored_references(study))


def references_for(study: optuna.Study, trials: Iterable[TrialRecord],
                   weights: Mapping[int, float]) -> dict[int, float]:
    """The study's stored references, completed for re-weighting: a weighted phase without one takes
    the baseline's value, else the first benchmarked trial's — the rule the study used for its
    own."""
    stored = stored_references(study)
    measured = sorted((t for t in trials if t.complete and t.outcome is Outcome.MEASURED),
                      key=lambda t: (not t.baseline, t.number))
    for concurrency, weight in weights.items():
        if weight <= 0 or stored.get(concurrency):
            continue
        for t in measured:
            value = phase_value(t.metrics, concurrency)
            if value and value > 0:
                stored[concurrency] = value
                break
    return stored


def score_benchmarked(study: optuna.Study, number: int, metrics: PhaseMetrics,
                      weights: Mapping[int, float], constraints: tuple[ConstraintSpec, ...],
                      skip_bounds: Mapping[int, float]) -> Judged:
    """A benchmarked trial judged against its study: the study's side — the references (the first
    full measurement fixes them) and the reference run to pair with — then
    ``objectives.scoring.judge``, which computes the rest."""
    references = fix_references(study, metrics, weights, number)
    return judge(metrics, Scorer(weights, references), reference_phases(study, number, metrics),
                 constraints, skip_bounds)


def _decode(stored: Mapping[str, Any] | None) -> dict[int, float]:
    return {int(c): float(v) for c, v in (stored or {}).items()}
