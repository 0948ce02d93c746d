"""The confirmation stage's fresh runs of a configuration, as stored on the study
(``StudyKey.CONFIRMATION``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from objectives.scoring import pooled_phase, with_paired
from tuner.store.phases import decode_phases


@dataclass(frozen=True)
class Confirmed:
    """A configuration's fresh runs from the confirmation stage: what its confirmed figures rest
    on."""

    # each run's phase metrics (feasible runs only)
    runs: tuple[Mapping[int, Mapping[str, Any]], ...]
    failed: int  # restarts that failed to start, or measured infeasible / without a score
    #: The confirmed baseline's runs: run k of this configuration pairs with its run k (the same
    #: prompts).
    reference: tuple[Mapping[int, Mapping[str, Any]], ...] = ()

    @property
    def pooled(self) -> dict[int, dict[str, Any]]:
        """Each phase over every run (objectives.scoring.pooled_phase): the confirmed figures, with
        each primary metric's interval paired with the confirmed baseline's runs
        (``<metric>_paired_ci``) where they kept their per-request parts — the baseline's own is
        then [m, m]: its score is what the others are compared with."""
        pooled = _pooled(self.runs)
        return with_paired(pooled, _pooled(self.reference)) if self.reference else pooled


def _pooled(runs: tuple[Mapping[int, Mapping[str, Any]], ...]) -> dict[int, dict[str, Any]]:
    concurrencies = sorted({c for run in runs for c in run})
    return {c: pooled_phase([run[c] for run in runs if c in run]) for c in concurrencies}


def confirmations(stored: Any) -> dict[int, Confirmed]:
    """``StudyKey.CONFIRMATION`` as stored → the fresh runs by trial number (an older list form:
    none)."""
    if not isinstance(stored, Mapping):
        return {}
    decoded = {int(number): (tuple(decode_phases(run) for run in entry.get("runs") or ()),
                             int(entry.get("failed") or 0))
               for number, entry in (stored.get("trials") or {}).items()}
    baseline = stored.get("baseline")
    reference = decoded[baseline][0] if isinstance(baseline, int) and baseline in decoded else ()
    return {number: Confirmed(runs, failed, reference) for number,
            (runs, failed) in decoded.items()}
