"""Configurations a study stored, for ``spectune deploy``: a trial's, the best one's, or the original.

Each trial records its launch configuration in the user attribute ``"config"`` (``ServerConfig.to_json()``).
"""

from __future__ import annotations

from optuna.trial import FrozenTrial

from tuner.core.errors import SpectuneError
from tuner.engine.ends import best_trial
from tuner.engine.opening import StudyNotFound
from tuner.query.load import StoredStudy
from tuner.sglang.launch import ServerConfig
from tuner.study.spec import StudySpec


def original_config(spec: StudySpec) -> ServerConfig:
    """The study's fixed flags plus its baseline: what the server ran before tuning, as the study file says."""
    return ServerConfig.build({**spec.server_flags, **spec.baseline}, spec.server_env)


def _config_of(trial: FrozenTrial) -> ServerConfig:
    data = trial.user_attrs.get("config")
    if not data:
        raise SpectuneError(f"trial {trial.number} has no stored configuration (it was never deployed)")
    return ServerConfig.from_json(data)


def trial_config(stored: StoredStudy, number: int) -> ServerConfig:
    for trial in stored.study.get_trials(deepcopy=False):
        if trial.number == number:
            return _config_of(trial)
    raise StudyNotFound(f"study {stored.spec.study.name!r} has no trial {number}")


def best_config(stored: StoredStudy) -> tuple[int, ServerConfig]:
    """The best feasible measured trial's configuration (the study loop's own definition of best)."""
    best = best_trial(stored.study)
    if best is None:
        raise StudyNotFound(f"study {stored.spec.study.name!r} has no feasible measured trial yet")
    return best.number, _config_of(best)
