"""Configurations a study stored, for ``spectune deploy``: a trial's, the best one's, or the original.

Each trial records its launch configuration (``Key.CONFIG``, tuner/engine/record.py).
"""

from __future__ import annotations

from typing import Any

from tuner.core.errors import SpectuneError
from tuner.engine.record import TrialRecord, best_record, records
from tuner.sglang.launch import ServerConfig
from tuner.study.spec import StudySpec


def original_config(spec: StudySpec) -> ServerConfig:
    """The study's fixed flags plus its baseline: what the server ran before tuning, as the study file says."""
    return ServerConfig.build({**spec.server_flags, **spec.baseline}, spec.server_env)


def _load_study(spec: StudySpec) -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        return optuna.load_study(study_name=spec.study.name, storage=spec.study.storage)
    except KeyError:
        raise SpectuneError(f"no study named {spec.study.name!r} in {spec.study.storage} — has it been "
                            f"tuned yet (spectune tune {spec.path})?") from None


def _config_of(record: TrialRecord) -> ServerConfig:
    if record.config is None:
        raise SpectuneError(f"trial {record.number} has no stored configuration (it was never deployed)")
    return record.config


def trial_config(spec: StudySpec, number: int) -> ServerConfig:
    study = _load_study(spec)
    for record in records(study):
        if record.number == number:
            return _config_of(record)
    raise SpectuneError(f"study {spec.study.name!r} has no trial {number}")


def best_config(spec: StudySpec) -> tuple[int, ServerConfig]:
    """The best feasible measured trial's configuration (the study loop's own definition of best)."""
    best = best_record(_load_study(spec))
    if best is None:
        raise SpectuneError(f"study {spec.study.name!r} has no feasible measured trial yet")
    return best.number, _config_of(best)
