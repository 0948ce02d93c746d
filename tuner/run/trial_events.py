"""What a trial tells its caller besides its value: the hooks it calls as it goes
(``TrialEvents``) and the exceptions that end it FAIL (``PhaseFailed``, ``ConfigTaken``);
tuner/run/trial.py raises and calls them, tuner/run/loop.py and tuner/app/tune.py handle them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tuner.store.record import TrialRecord


class PhaseFailed(Exception):
    """A phase failed on every attempt (e.g. ``simulator-overloaded``). The trial ends FAIL — the
    sampler learns nothing from a figure that measured the host — with its attempts stored, and the
    loop queues it again."""

    def __init__(self, failure_class: str, message: str) -> None:
        super().__init__(f"{failure_class}: {message}")
        self.failure_class = failure_class


class ConfigTaken(Exception):
    """Another worker is measuring this configuration right now. The trial ends FAIL (samplers
    ignore FAIL; the other worker's RUNNING trial already tells them the point is pending) and
    counts as free."""


@dataclass
class TrialEvents:
    """Hooks for the live view and the study loop; every one is optional."""

    on_stage: Callable[[int, str], None] | None = None
    #: Called with the record the trial ends with, just before Optuna stores its state.
    on_done: Callable[[TrialRecord], None] | None = None
    #: Called once the trial's configuration is visible to other workers (its config key is stored)
    #: or it was rejected — the point after which a worker may let the next one ask
    #: (tuner/run/loop.py).
    on_proposed: Callable[[], None] | None = None
    #: Called with the trial's number and the flag values it is about to deploy (the live view shows
    #: them then, not only once the trial ends).
    on_deploy: Callable[[int, Mapping[str, Any]], None] | None = None
