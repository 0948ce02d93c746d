"""Which Optuna sampler a study uses: each one a ``SamplerKind``, named once, in ``SAMPLERS``.

``auto`` is the default, chosen from bench/sample_efficiency.py's figures over six landscapes
(docs/benchmarks.md): the grey-box sampler (tuner/search/greybox.py: GPs on accept length, speed per
accepted token and feasibility, proposing inside a trust region around the best trial, never a tree
too shallow for its steps, and with the tree's tokens per level as an accept-length input,
tuner/search/tree_shape.py; NumPy/SciPy only, no PyTorch), after the designed start
(tuner/search/baseline.py). After the same start, it beats multivariate TPE at 20 trials on five of
the six and ties on the sixth. A multi-objective (Pareto) study gets TPE. ``tpe``, ``random`` and
``gp`` (``pip install 'spectune[gp]'``) stay available. The choice is stored on the study so a
result says how it was found.

A new sampler is one entry here (and its name in ``tuner.study.spec.SamplerName``, which the study
file checks; tests/unit/search/test_samplers.py holds the two together).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import optuna

from tuner.core.errors import SpectuneError
from tuner.core.extras import gp_available
from tuner.search.greybox import GreyBoxSampler
from tuner.study.space import SearchSpace

#: Random points before the model takes over. The baseline counts as one of them.
N_STARTUP_TRIALS = 6
#: What ``auto`` means.
AUTO = "greybox"


class SkippedPhases(enum.Enum):
    """How a trial whose remaining phases were skipped (tuner/run/trial.py ``_skip_bound``) is
    valued."""

    #: At its optimistic bound (GP and random: measured both ways, docs/benchmarks.md).
    OPTIMISTIC_BOUND = "optimistic-bound"
    #: At no more than the median score: the bound lands just below the incumbent, so TPE would
    #: count hopeless points among its best.
    AT_MEDIAN = "at-median"
    #: Never skipped: the grey-box sampler models each phase's speed from the trials that measured
    #: it, and the optimistic bound is no bound where a small tree is slow at C=1 and several times
    #: faster per accepted token at C=64 than anything measured yet (docs/benchmarks.md, the Llama
    #: landscape).
    NEVER = "never"


#: ``build(seed, space, multi_objective)``: the Optuna sampler for one study.
Builder = Callable[[int | None, SearchSpace | None, bool], optuna.samplers.BaseSampler]


@dataclass(frozen=True)
class SamplerKind:
    name: str
    build: Builder
    skipped_phases: SkippedPhases
    #: Whether it learns where configurations fail (start-up OOM, crashes) from the failures'
    #: causes, rather than only from the constraint Optuna hands every sampler.
    models_failures: bool = False
    #: The optional dependency it needs (``pip install 'spectune[<extra>]'``), None: the core
    #: install.
    extra: str | None = None

    def available(self) -> bool:
        return self.extra != "gp" or gp_available()


def _tpe(seed: int | None, space: SearchSpace | None = None, multi_objective: bool = False
         ) -> optuna.samplers.BaseSampler:
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=N_STARTUP_TRIALS,
                                      multivariate=True, constant_liar=True, group=False)


def _greybox(seed: int | None, space: SearchSpace | None,
             multi_objective: bool) -> optuna.samplers.BaseSampler:
    # its models score one weighted objective: a Pareto study gets TPE
    if space is None or multi_objective:
        return _tpe(seed)
    return GreyBoxSampler(space, space.spec.objective.weights, seed=seed)


SAMPLERS: dict[str, SamplerKind] = {kind.name: kind for kind in (
    SamplerKind("greybox", _greybox, SkippedPhases.NEVER, models_failures=True),
    SamplerKind("tpe", _tpe, SkippedPhases.AT_MEDIAN),
    SamplerKind("gp", lambda seed, space, multi: optuna.samplers.GPSampler(seed=seed,
                                                                            n_startup_trials=N_STARTUP_TRIALS),
                SkippedPhases.OPTIMISTIC_BOUND, extra="gp"),
    SamplerKind("random", lambda seed, space, multi: optuna.samplers.RandomSampler(seed=seed),
                SkippedPhases.OPTIMISTIC_BOUND),
)}


def sampler_kind(name: str) -> SamplerKind:
    """The sampler a study file's ``sampler`` (or a study's stored name) means; ``auto`` is the
    default's."""
    kind = SAMPLERS.get(AUTO if name == "auto" else name)
    if kind is None:
        raise SpectuneError(f"unknown sampler {name!r} (known: auto, {', '.join(SAMPLERS)})")
    if not kind.available():
        raise SpectuneError(
            f"sampler {name!r} needs PyTorch and SciPy: pip install 'spectune[{kind.extra}]' "
            "(or use 'tpe')")
    return kind


def resolve_sampler_name(name: str) -> str:
    return sampler_kind(name).name


def make_sampler(name: str, seed: int | None, *, multi_objective: bool = False,
                 space: SearchSpace | None = None
                 ) -> optuna.samplers.BaseSampler:
    return sampler_kind(name).build(seed, space, multi_objective)


def skipped_phases(stored_name: object) -> SkippedPhases:
    """How a study's skipped trials are valued, from the sampler name stored on it (an older study,
    or one whose name is not known here: the optimistic bound, as before samplers said it)."""
    kind = SAMPLERS.get(stored_name) if isinstance(stored_name, str) else None
    return kind.skipped_phases if kind is not None else SkippedPhases.OPTIMISTIC_BOUND
