"""Which Optuna sampler a study uses.

``auto`` is the default, chosen from bench/sample_efficiency.py's figures over six landscapes (docs/benchmarks.md):
the grey-box sampler (tuner/engine/greybox.py: GPs on accept length, speed per accepted token and feasibility,
proposing inside a trust region around the best trial, never a tree too shallow for its steps, and with the
tree's tokens per level as an accept-length input, tuner/engine/tree_shape.py; NumPy/SciPy only, no PyTorch),
after the designed start (tuner/engine/baseline.py). After the same start, it beats multivariate TPE at 20
trials on five of the six and ties on the sixth. A multi-objective (Pareto) study gets TPE. ``tpe`` (with
skipped trials handed to it at no more than the median, tuner/engine/trial.py), ``random`` and ``gp`` (``pip
install 'spectune[gp]'``) stay available. The choice is stored on the study so a result says how it was found.
"""

from __future__ import annotations

from typing import Literal

import optuna

from tuner.core.errors import SpectuneError
from tuner.core.extras import gp_available
from tuner.engine.greybox import GreyBoxSampler
from tuner.study.space import SearchSpace

#: Random points before the model takes over. The baseline counts as one of them.
N_STARTUP_TRIALS = 6


def resolve_sampler_name(name: str) -> Literal["gp", "tpe", "random", "greybox"]:
    if name == "auto":
        return "greybox"
    if name == "gp" and not gp_available():
        raise SpectuneError("sampler 'gp' needs PyTorch and SciPy: pip install 'spectune[gp]' (or use 'tpe')")
    if name not in ("gp", "tpe", "random", "greybox"):
        raise SpectuneError(f"unknown sampler {name!r}")
    return name  # type: ignore[return-value]


def make_sampler(name: str, seed: int | None, *, multi_objective: bool = False, space: SearchSpace | None = None
                 ) -> optuna.samplers.BaseSampler:
    resolved = resolve_sampler_name(name)
    if resolved == "greybox" and space is not None and not multi_objective:
        return GreyBoxSampler(space, space.spec.objective.weights, seed=seed)
    if resolved == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if resolved == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=N_STARTUP_TRIALS)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=N_STARTUP_TRIALS, multivariate=True,
                                      constant_liar=True, group=False)
