"""Configurations a study stored, for ``spectune deploy``: a trial's, the best one's, or the original.

Each trial records its launch configuration (``Key.CONFIG``, tuner/engine/record.py).
"""

from __future__ import annotations

from tuner.core.errors import SpectuneError
from tuner.engine.opening import StudyNotFound
from tuner.engine.record import TrialRecord, best_record, records
from tuner.query.load import StoredStudy
from tuner.sglang.launch import ServerConfig
from tuner.study.spec import StudySpec


def original_config(spec: StudySpec) -> ServerConfig:
    """The study's fixed flags plus its baseline: what the server ran before tuning, as the study file says."""
    return ServerConfig.build({**spec.server_flags, **spec.baseline}, spec.server_env)


def _config_of(record: TrialRecord) -> ServerConfig:
    if record.config is None:
        raise SpectuneError(f"trial {record.number} has no stored configuration (it was never deployed)")
    return record.config


def trial_config(stored: StoredStudy, number: int) -> ServerConfig:
    for record in records(stored.study):
        if record.number == number:
            return _config_of(record)
    raise StudyNotFound(f"study {stored.spec.study.name!r} has no trial {number}")


def best_config(stored: StoredStudy) -> tuple[int, ServerConfig]:
    """The best feasible measured trial's configuration (the study loop's own definition of best)."""
    best = best_record(stored.study)
    if best is None:
        raise StudyNotFound(f"study {stored.spec.study.name!r} has no feasible measured trial yet")
    return best.number, _config_of(best)
