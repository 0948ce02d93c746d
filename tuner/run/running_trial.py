"""The Optuna trial a runner is measuring, behind one object: everything the runner asks of Optuna's
trial and of the study around it.

Why one object: the runner (tuner/run/trial.py) builds a typed draft (``TrialRecord``) and decides
what happens to it; the Optuna trial is only where that draft is stored and what the study already
holds is read. Passed around as ``optuna.Trial``, every path of the runner called into Optuna, the
storage layer and the study's records on its own — saves, constraints, duplicate lookups, the
median score — each with its own spelling. Here each is one method, and the runner never touches the
Optuna trial after wrapping it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.core.interrupts import held
from tuner.search.samplers import SkippedPhases, skipped_phases
from tuner.store.keys import Key, StudyKey
from tuner.store.record import TrialRecord, measured_records, write
from tuner.study.proposal import Proposal
from tuner.study.space import SearchSpace


class RunningTrial:
    """One running Optuna trial: its number, its study, and what its storage holds."""

    def __init__(self, trial: optuna.Trial) -> None:
        self._trial = trial
        self.number: int = trial.number
        self.study: optuna.Study = trial.study
        #: What the trial's storage holds: what the queue put on it (the baseline mark), then each
        #: saved draft.
        self.stored = TrialRecord.from_attrs(trial.number, TrialState.RUNNING, trial.user_attrs,
                                             {})

    @property
    def is_baseline(self) -> bool:
        return self.stored.baseline

    @property
    def is_reference(self) -> bool:
        """One of the study's reference points (SGLang's adaptive steps, speculation off): measured
        once, for the comparison ``best`` prints."""
        return bool(self._trial.user_attrs.get(Key.REFERENCE))

    def propose(self, space: SearchSpace) -> Proposal:
        """The sampler's parameters for this trial, decoded by the space."""
        return space.suggest(self._trial)

    def save(self, draft: TrialRecord) -> None:
        """Store what ``draft`` adds to what the trial's storage holds — all of it: a signal during
        the writes (one per attribute) waits until they are done, so an interrupted trial never
        shows its requested flags without its configuration."""
        with held():
            write(self._trial, draft, since=self.stored)
            self.stored = draft

    def constrain(self, constraints: Mapping[str, float]) -> None:
        """The trial's constraint values (≤ 0 satisfied), as Optuna's constrained samplers read
        them."""
        for key, value in constraints.items():
            self._trial.set_constraint(key, value)

    def already_measured(self, key: str) -> FrozenTrial | None:
        """Another trial that measured the configuration keyed ``key`` (COMPLETE, preferred) or is
        measuring it now (RUNNING: another worker's trial with the same config key), or None."""
        running = None
        for t in self.study.get_trials(deepcopy=False,
                                       states=(TrialState.COMPLETE, TrialState.RUNNING)):
            if t.number == self.number or t.user_attrs.get(Key.CONFIG_KEY) != key:
                continue
            record = TrialRecord.from_stored(t)
            if record.is_measured:
                return t
            if record.state == TrialState.RUNNING and running is None:
                running = t
        return running

    def median_score(self) -> float:
        """The median score of the study's scored trials (1.0 before any)."""
        scores = [r.score for r in measured_records(self.study)
                  if r.is_scored and r.score is not None]
        return statistics.median(scores) if scores else 1.0

    def candidates(self) -> list[TrialRecord]:
        """The study's measured trials that may be its answer."""
        return [r for r in measured_records(self.study) if r.is_candidate]

    def skipped_phases(self) -> SkippedPhases:
        """How the study's sampler values a trial whose phases were skipped."""
        return skipped_phases(self.study.user_attrs.get(StudyKey.SAMPLER))
