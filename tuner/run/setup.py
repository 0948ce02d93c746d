"""What every study run sets up the same way — ``spectune tune``, each worker and the landscape API.

The objectives Optuna optimises (one weighted score, or C=1 and C=64 throughput for a Pareto study),
the check that the stored trials belong to this study file (tuner/store/fingerprint.py), and the
sampler's name on the study (so a result says how it was found, and the trial runner knows how to
value a skipped trial)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import optuna

from tuner.search.samplers import make_sampler, sampler_kind
from tuner.store.fingerprint import record_or_check
from tuner.store.keys import StudyKey
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec


@dataclass(frozen=True)
class Objectives:
    """What Optuna optimises for a study file, in Optuna's terms."""

    pareto: bool
    directions: list[Literal["maximize"]]  # throughput and scores: more is better
    metric_names: list[str]

    @classmethod
    def of(cls, spec: StudySpec) -> Objectives:
        pareto = spec.objective.mode == "pareto"
        if pareto:
            return cls(True, ["maximize", "maximize"],
                       [f"c{c}_tok_s" for c in sorted(spec.objective.weights)])
        return cls(False, ["maximize"], ["score"])


def study_sampler(spec: StudySpec, space: SearchSpace,
                  seed: int | None) -> optuna.samplers.BaseSampler:
    """The study file's sampler, seeded with ``seed`` (a worker's own, or the file's)."""
    return make_sampler(spec.study.sampler, seed, multi_objective=Objectives.of(spec).pareto,
                        space=space)


def adopt(study: optuna.Study, spec: StudySpec) -> str | None:
    """Make an opened study this study file's: refuse trials of a changed file (``StudyChanged``),
    and record the sampler. Returns the line to show when only ``[objective]`` changed (the stored
    trials are re-ranked)."""
    reranked = record_or_check(study, spec)
    study.set_user_attr(StudyKey.SAMPLER, sampler_kind(spec.study.sampler).name)
    return reranked
