"""The confirmation stage as stored on the study (``StudyKey.CONFIRMATION``): its plan, and each
configuration's fresh runs — written and read back through one typed record,
``ConfirmationStage``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import optuna

from objectives.scoring import PhaseFigures, PhaseMetrics, pooled_phase, with_paired
from tuner.store.keys import StudyKey
from tuner.store.phases import decode_phases, encode_phases


@dataclass(frozen=True)
class Confirmed:
    """A configuration's fresh runs from the confirmation stage: what its confirmed figures rest
    on."""

    # each run's phase metrics (feasible runs only)
    runs: tuple[PhaseMetrics, ...]
    failed: int  # restarts that failed to start, or measured infeasible / without a score
    #: The confirmed baseline's runs: run k of this configuration pairs with its run k (the same
    #: prompts).
    reference: tuple[PhaseMetrics, ...] = ()

    @property
    def pooled(self) -> dict[int, dict[str, object]]:
        """Each phase over every run (objectives.scoring.pooled_phase): the confirmed figures, with
        each primary metric's interval paired with the confirmed baseline's runs
        (``<metric>_paired_ci``) where they kept their per-request parts — the baseline's own is
        then [m, m]: its score is what the others are compared with."""
        pooled = _pooled(self.runs)
        return with_paired(pooled, _pooled(self.reference)) if self.reference else pooled


def _pooled(runs: tuple[PhaseMetrics, ...]) -> dict[int, dict[str, object]]:
    concurrencies = sorted({c for run in runs for c in run})
    return {c: pooled_phase([run[c] for run in runs if c in run]) for c in concurrencies}


@dataclass(frozen=True)
class StageEntry:
    """One configuration's part of the stage: its feasible fresh runs, in the stored form (phases
    by concurrency as a string), and how many restarts failed."""

    runs: tuple[Mapping[str, PhaseFigures], ...] = ()
    failed: int = 0


@dataclass(frozen=True)
class ConfirmationStage:
    """The stage's plan — the trials in the order they are measured (the baseline last), the fresh
    restarts each gets, the baseline's trial — whether it finished, and each trial's runs."""

    order: tuple[int, ...] = ()
    repeats: int = 0
    baseline: int | None = None
    complete: bool = False
    trials: Mapping[int, StageEntry] = field(default_factory=dict)

    @classmethod
    def begin(cls, order: Sequence[int], baseline: int | None,
              repeats: int) -> ConfirmationStage:
        return cls(tuple(order), repeats, baseline, False, {n: StageEntry() for n in order})

    @classmethod
    def from_stored(cls, stored: object) -> ConfirmationStage | None:
        """``StudyKey.CONFIRMATION`` as stored; None where there is none (or an older list
        form)."""
        if not isinstance(stored, Mapping):
            return None
        baseline = stored.get("baseline")
        order = stored.get("order")
        trials = stored.get("trials")
        return cls(order=tuple(int(n) for n in order) if isinstance(order, list) else (),
                   repeats=int(stored.get("repeats") or 0),
                   baseline=baseline if isinstance(baseline, int) else None,
                   complete=bool(stored.get("complete")),
                   trials={int(n): StageEntry(tuple(entry.get("runs") or ()),
                                              int(entry.get("failed") or 0))
                           for n, entry in (trials if isinstance(trials, Mapping) else {}).items()})

    def to_stored(self) -> dict[str, object]:
        return {"baseline": self.baseline, "order": list(self.order), "repeats": self.repeats,
                "complete": self.complete,
                "trials": {str(n): {"runs": [dict(run) for run in entry.runs],
                                    "failed": entry.failed} for n, entry in self.trials.items()}}

    def with_run(self, number: int,
                 metrics: PhaseMetrics | None) -> ConfirmationStage:
        """One more fresh run of trial ``number``: its phases, or None for a failed one."""
        entry = self.trials.get(number, StageEntry())
        entry = (replace(entry, failed=entry.failed + 1) if metrics is None
                 else replace(entry, runs=(*entry.runs, encode_phases(metrics))))
        return replace(self, trials={**self.trials, number: entry})

    def is_done(self, order: Sequence[int], repeats: int) -> bool:
        """Finished for the same configurations and repeats: not measured again (e.g. a resumed
        study that had already reached its end)."""
        return self.complete and self.order == tuple(order) and self.repeats == repeats

    def keeping(self, earlier: ConfirmationStage) -> ConfirmationStage:
        """With the runs of trials an earlier stage confirmed and this one did not re-measure (a
        stage stores only its own)."""
        kept = {n: entry for n, entry in earlier.trials.items() if n not in self.order}
        return replace(self, trials={**kept, **self.trials})

    def confirmed(self) -> dict[int, Confirmed]:
        """The fresh runs by trial number, each paired with the baseline's."""
        decoded = {number: tuple(decode_phases(run) for run in entry.runs)
                   for number, entry in self.trials.items()}
        reference = decoded.get(self.baseline, ()) if self.baseline is not None else ()
        return {number: Confirmed(runs, self.trials[number].failed, reference)
                for number, runs in decoded.items()}


def stored_stage(study: optuna.Study) -> ConfirmationStage | None:
    """The study's confirmation stage, or None where it has none (or an older list form)."""
    return ConfirmationStage.from_stored(study.user_attrs.get(StudyKey.CONFIRMATION))


def store_stage(study: optuna.Study, stage: ConfirmationStage) -> None:
    study.set_user_attr(StudyKey.CONFIRMATION, stage.to_stored())


def confirmations(stored: object) -> dict[int, Confirmed]:
    """``StudyKey.CONFIRMATION`` as stored → the fresh runs by trial number (an older list form:
    none)."""
    stage = ConfirmationStage.from_stored(stored)
    return stage.confirmed() if stage is not None else {}
