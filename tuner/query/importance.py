"""Each tuned flag's importance for the score under a ranking — one computation for the report and
the dashboard.

Optuna's default evaluator (fANOVA) over the rankable trials (feasible, measured, scored under the
ranking's weights and constraints) and the *decoded* flag values, on an in-memory study: the bars
name flags, not the encodings Optuna samples, and a re-weighting re-ranks the importances too.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution

from tuner.query.ranking import Ranking

#: Fewer feasible trials than this make importances a rough guide only (the report says so).
IMPORTANCE_MIN_TRIALS = 20


def importance_values(ranking: Ranking,
                      tuned_flags: Sequence[str]) -> tuple[dict[str, float], int] | None:
    """Optuna's importances of each tuned flag (by its full name) for the score, and how many trials
    they rest on; None with too few feasible trials or nothing varied."""
    rankable = [t for t in ranking.trials if t.rankable]
    flags = [f for f in tuned_flags if all(f in t.tuned for t in rankable)]
    if len(rankable) < 3 or not flags:
        return None
    distributions = {f: _distribution([t.tuned[f] for t in rankable]) for f in flags}
    varying = {f: d for f, d in distributions.items() if d is not None}
    if not varying:
        return None
    study = optuna.create_study(direction="maximize")
    study.add_trials([optuna.trial.create_trial(
        value=t.score, params={f: _param(t.tuned[f]) for f in varying}, distributions=varying)
                      for t in rankable])
    level = optuna.logging.get_verbosity()
    # thin data makes Optuna log; the page says so itself
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return dict(optuna.importance.get_param_importances(study)), len(rankable)
    # too few or too uniform trials to estimate
    except (ValueError, RuntimeError, ZeroDivisionError):
        return None
    finally:
        optuna.logging.set_verbosity(level)


def _param(value: Any) -> Any:
    return (float(value) if isinstance(value, int | float) and not isinstance(value, bool)
            else str(value))


def _distribution(values: list[Any]) -> BaseDistribution | None:
    """The observed range of one flag; None when it never varied (nothing to attribute)."""
    converted = [_param(v) for v in values]
    if len(set(converted)) < 2:
        return None
    if all(isinstance(v, float) for v in converted):
        return FloatDistribution(min(converted), max(converted))
    return CategoricalDistribution(sorted(set(map(str, converted))))
