"""What a running phase reports as it goes: objectives/phase.py calls a ``ProgressCallback`` with a
``PhaseProgress``, which a study's live view (tuner/app/progress.py) and ``spectune bench``'s report
(objectives/report.py) show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class PhaseProgress:
    label: str
    stage: Literal["warmup", "measure", "done"]
    finished: int  # measured requests that ended (successful or failed)
    failed: int
    target_requests: int | None
    elapsed_s: float  # since the measured part started
    target_duration_s: float | None
    output_tokens: int  # tokens of finished measured requests


ProgressCallback = Callable[[PhaseProgress], None]
