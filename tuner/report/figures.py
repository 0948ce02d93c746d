"""The report's plots. Each function returns a matplotlib Figure, or None with nothing to show.

Optuna's own matplotlib visualizations draw the Pareto front and the parameter importances (each from a small
in-memory study built from the ranking, so that *this* ranking's scores and feasibility are what is plotted,
not the values stored at tuning time); the history and the failure counts are plain matplotlib.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import matplotlib

matplotlib.use("Agg")  # files only: never open a window, work without a display

import matplotlib.pyplot as plt  # after choosing the backend
import optuna
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution

from tuner.engine.record import Outcome
from tuner.query.ranking import Ranking, TrialView
from tuner.query.table import phase_label, short_flag

FEASIBLE = "#1f77b4"
INFEASIBLE = "#9e9e9e"
FAILED = "#d62728"
BEST = "#2ca02c"


@contextmanager
def _quiet() -> Iterator[None]:
    """Optuna marks its matplotlib plots experimental and logs on thin data; the report says so itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        level = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        try:
            yield
        finally:
            optuna.logging.set_verbosity(level)


def history(ranking: Ranking) -> Figure | None:
    """Score of every measured trial in order, infeasible ones greyed, the best feasible so far as a line."""
    measured = [t for t in ranking.trials if t.outcome is Outcome.MEASURED and t.score is not None]
    if not measured:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.2))
    ok = [t for t in measured if t.feasible]
    bad = [t for t in measured if not t.feasible]
    ax.scatter([t.number for t in ok], [t.score or 0.0 for t in ok], color=FEASIBLE, label="feasible", zorder=3)
    if bad:
        ax.scatter([t.number for t in bad], [t.score or 0.0 for t in bad], color=INFEASIBLE, marker="x",
                   label="infeasible (constraint violated)", zorder=3)
    # A "taken" trial (another worker was measuring the same configuration) cost nothing and failed nothing.
    failed = [t for t in ranking.trials
              if t.outcome in (Outcome.DEPLOY_FAILED, Outcome.REJECTED) or t.outcome is Outcome.INTERRUPTED]
    if failed:
        low = min(t.score or 0.0 for t in measured)
        ax.scatter([t.number for t in failed], [low] * len(failed), color=FAILED, marker="v",
                   label="no measurement (rejected / failed to start / interrupted)", zorder=2)
    xs, ys, best = [], [], float("-inf")
    for t in sorted(ok, key=lambda t: t.number):
        if t.rankable and (t.score or 0.0) > best:
            best = t.score or 0.0
        if best > float("-inf"):
            xs.append(t.number)
            ys.append(best)
    if xs:
        xs.append(max(t.number for t in ranking.trials))
        ys.append(ys[-1])
        ax.step(xs, ys, where="post", color=BEST, label="best so far")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":", label="reference run = 1.0")
    ax.set_xlabel("trial")
    ax.set_ylabel("score")
    ax.set_title("Optimization history")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    return fig


def speeds(ranking: Ranking) -> Figure | None:
    """Lowest vs highest concurrency (C=1 vs C=64) with the Pareto front and iso-score lines of the weights."""
    if len(ranking.concurrencies) < 2:
        return None
    low, high = ranking.concurrencies[0], ranking.concurrencies[-1]
    points = [t for t in ranking.trials if t.outcome is Outcome.MEASURED
              and t.value(low) is not None and t.value(high) is not None]
    if not points:
        return None
    study = optuna.create_study(directions=["maximize", "maximize"])
    study.add_trials([optuna.trial.create_trial(
        values=[t.value(low) or 0.0, t.value(high) or 0.0], user_attrs={"number": t.number},
        constraints={"spectune": max(t.violations.values(), default=0.0)}) for t in points])
    with _quiet():
        ax = optuna.visualization.matplotlib.plot_pareto_front(study, target_names=[phase_label(low),
                                                                                   phase_label(high)])
    fig = cast(Figure, ax.figure)
    for artist in ax.collections:  # Optuna calls the front "Best Trial"; under re-weighting it is the front
        if artist.get_label() == "Best Trial":
            artist.set_label("Pareto front (feasible)")
    _iso_score_lines(ax, ranking, low, high, [t for t in points if t.rankable])
    ax.set_title(f"C={low} vs C={high}: Pareto front and iso-score lines")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.set_size_inches(10, 5.5)
    fig.tight_layout()
    return fig


def _iso_score_lines(ax: Any, ranking: Ranking, low: int, high: int, rankable: Sequence[TrialView]) -> None:
    """Lines of equal score: w_l·x/ref_l + w_h·y/ref_h = s. Only phases with weight matter; a phase with
    weight 0 makes the lines parallel to its axis."""
    scorer = ranking.scorer
    weights = scorer.normalized_weights
    if set(weights) - {low, high}:
        return  # a third weighted phase: the score is not a function of these two axes
    w_l, w_h = weights.get(low, 0.0), weights.get(high, 0.0)
    r_l, r_h = scorer.reference(low), scorer.reference(high)
    best = max((t.score or 0.0 for t in rankable), default=None)
    # The best score, the reference run, and a few steps below for scale.
    levels = sorted({1.0, 0.9, 0.8, *([round(best, 3)] if best is not None else [])}, reverse=True)
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    for s in levels:
        is_best = best is not None and abs(s - best) < 1e-3
        style = {"color": BEST if is_best else "black" if s == 1.0 else INFEASIBLE, "linewidth": 0.9,
                 "linestyle": "--" if is_best or s == 1.0 else ":"}
        label = f"score {s:.3f}" + (" (best)" if is_best else " (reference)" if s == 1.0 else "")
        if w_h > 0:
            ax.plot([x0, x1], [r_h * (s - w_l * x / r_l) / w_h for x in (x0, x1)], label=label, **style)
        else:
            ax.axvline(s * r_l / w_l, label=label, **style)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)


def importances(ranking: Ranking, tuned_flags: Sequence[str]) -> Figure | None:
    """How much each tuned flag explains the score among feasible measured trials (Optuna's evaluator)."""
    rankable = [t for t in ranking.trials if t.rankable]
    flags = [f for f in tuned_flags if all(f in t.tuned for t in rankable)]
    if len(rankable) < 3 or not flags:
        return None
    distributions = {short_flag(f): _distribution([t.tuned[f] for t in rankable]) for f in flags}
    varying = {name: d for name, d in distributions.items() if d is not None}
    if not varying:
        return None
    study = optuna.create_study(direction="maximize")
    study.add_trials([optuna.trial.create_trial(
        value=t.score, params={name: _param(t.tuned[f]) for f, name in zip(flags, distributions, strict=True)
                               if name in varying},
        distributions=varying) for t in rankable])
    try:
        with _quiet():
            ax = optuna.visualization.matplotlib.plot_param_importances(study, target_name="score")
    except (ValueError, RuntimeError, ZeroDivisionError):  # too few or too uniform trials to estimate
        return None
    fig = cast(Figure, ax.figure)
    ax.set_title("", loc="left")  # Optuna's generic title; ours names what was evaluated
    ax.set_title(f"Importances for the score ({len(rankable)} feasible measured trials)")
    ax.set_ylabel("tuned flag")
    fig.set_size_inches(8, 4)
    fig.tight_layout()
    return fig


def _param(value: Any) -> Any:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


def _distribution(values: list[Any]) -> BaseDistribution | None:
    """The observed range of one flag; None when it never varied (nothing to attribute)."""
    converted = [_param(v) for v in values]
    if len(set(converted)) < 2:
        return None
    if all(isinstance(v, float) for v in converted):
        return FloatDistribution(min(converted), max(converted))
    return CategoricalDistribution(sorted(set(map(str, converted))))


def failure_counts(ranking: Ranking) -> Counter[str]:
    """Why trials could not be the answer, by class; reused duplicates are not counted twice."""
    return Counter(t.failure for t in ranking.trials if t.failure is not None and t.outcome is not Outcome.DUPLICATE)


def failures(ranking: Ranking) -> Figure | None:
    counts = failure_counts(ranking)
    if not counts:
        return None
    labels = sorted(counts, key=lambda k: (-counts[k], k))
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.45 * len(labels) + 0.8))
    bars = ax.barh(labels, [counts[k] for k in labels], color=FAILED)
    ax.bar_label(bars, padding=3)
    ax.invert_yaxis()
    ax.set_xlabel("trials")
    ax.set_title(f"Failures by class ({sum(counts.values())} of {len(ranking.trials)} trials)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    return fig
