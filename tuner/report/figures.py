"""The report's plots as plotly figures (interactive: hover shows the trial, its flags and figures),
or None with nothing to show.

One style for every plot (``STYLE``): the same colour and marker mean the same kind of trial
everywhere, the baseline is a black star, the best a green ring, legends sit above each plot.
Importances come from Optuna's evaluator run on an in-memory study over the *decoded* flags, so the
bars name flags, not encodings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tuner.query.importance import IMPORTANCE_MIN_TRIALS, importance_values
from tuner.query.ranking import Ranking, TrialView
from tuner.query.table import phase_label
from tuner.query.winner import answer_status
from tuner.sglang import versions
from tuner.store.record import Outcome

FEASIBLE = "#1f77b4"
INFEASIBLE = "#9e9e9e"
FAILED = "#d62728"
BEST = "#2ca02c"
BASELINE = "#000000"
#: (colour, marker symbol) per kind of trial, shared by every plot.
STYLE = {"feasible": (FEASIBLE, "circle"), "infeasible": (INFEASIBLE, "x"),
         "failed": (FAILED, "triangle-down"),
         "baseline": (BASELINE, "star"), "best": (BEST, "circle-open")}
#: Flags a failures plot prefers as its axes: where out-of-memory happens is a question of these
#: two.
MEMORY_AXES = ("--mem-fraction-static", "--cuda-graph-max-bs-decode")


def hover(t: TrialView, ranking: Ranking) -> str:
    """Trial number, status, every tuned flag with its value, the phases' tok/s and the score."""
    flags = t.tuned or {k: v for k, v in t.record.params_decoded.items()}
    lines = [f"<b>trial {t.number}</b>{' (baseline)' if t.record.baseline else ''}: {t.status}"]
    lines += [f"{flag}={value}" for flag, value in flags.items()]
    lines += [f"{phase_label(c)}: {v:.1f}" for c in ranking.concurrencies
              if (v := t.value(c)) is not None]
    if t.score is not None:
        lines.append(f"score {t.score:.3f}")
    if t.failure:
        lines.append(f"failure: {t.failure}")
    return "<br>".join(lines)


def _kind(t: TrialView) -> str:
    if t.outcome is Outcome.MEASURED and t.feasible:
        return "feasible"
    if t.outcome is Outcome.MEASURED:
        return "infeasible"
    return "failed"


def _layout(fig: go.Figure, title: str, x: str, y: str, *, height: int = 430) -> go.Figure:
    fig.update_layout(title=title, height=height, template="plotly_white", hovermode="closest",
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
                      margin={"t": 90, "l": 60, "r": 20, "b": 50})
    fig.update_xaxes(title_text=x)
    fig.update_yaxes(title_text=y)
    return fig


def _points(fig: go.Figure, trials: Sequence[TrialView], ranking: Ranking, kind: str,
            xs: Sequence[Any], ys: Sequence[Any], name: str, **extra: Any) -> None:
    if not trials:
        return
    colour, symbol = STYLE[kind]
    size = 16 if kind in ("baseline", "best") else 9
    marker: dict[str, Any] = {"color": colour, "symbol": symbol, "size": size}
    if kind == "best":
        marker["line"] = {"width": 3, "color": colour}
    fig.add_trace(go.Scatter(x=list(xs), y=list(ys), mode="markers", name=name, marker=marker,
                             text=[hover(t, ranking) for t in trials],
                             hovertemplate="%{text}<extra></extra>", **extra))


def _marks(fig: go.Figure, ranking: Ranking, x: Any, y: Any) -> None:
    """The baseline and the best on top of a plot; ``x``/``y`` map a trial to its coordinates (or
    None)."""
    for kind, trial, name in (("baseline", _baseline(ranking), "baseline"),
                              ("best", ranking.best, "best")):
        if trial is not None and x(trial) is not None and y(trial) is not None:
            label = f"{name} (trial {trial.number}" + (f", {answer_status(ranking)})"
                                                       if kind == "best" else ")")
            _points(fig, [trial], ranking, kind, [x(trial)], [y(trial)], label)


def _baseline(ranking: Ranking) -> TrialView | None:
    return next((t for t in ranking.trials if t.record.baseline and t.outcome is Outcome.MEASURED),
                None)


def history(ranking: Ranking) -> go.Figure | None:
    """Score of every measured trial in order; failures at the bottom; the best feasible so far as a
    line."""
    measured = [t for t in ranking.trials if t.outcome is Outcome.MEASURED and t.score is not None]
    if not measured:
        return None
    fig = go.Figure()
    low = min(t.score or 0.0 for t in measured)
    for kind, name in (("feasible", "feasible"),
                       ("infeasible", "infeasible (constraint violated)")):
        group = [t for t in measured if _kind(t) == kind]
        _points(fig, group, ranking, kind, [t.number for t in group], [t.score for t in group],
                name)
    # A "taken" trial (another worker was measuring the same configuration) cost nothing and failed
    # nothing.
    failed = [t for t in ranking.trials
              if t.outcome in (Outcome.DEPLOY_FAILED, Outcome.REJECTED, Outcome.INTERRUPTED,
                               Outcome.PHASE_FAILED, Outcome.RUN_FAILED)]
    _points(fig, failed, ranking, "failed", [t.number for t in failed], [low] * len(failed),
            "no measurement (rejected / failed to start / crashed, hung or wrong output / "
            "interrupted / phase failed)")
    xs, ys = best_so_far(ranking)
    if xs:
        # The line is the highest study score so far: it ends at the ranking's leader, which is the
        # ring (the answer) unless the confirmation chose another trial — then the legend says which
        # each one is.
        leader = ranking.leader
        same = (leader is not None and ranking.best is not None
                and leader.number == ranking.best.number)
        name = ("best so far" if same
                else f"highest study score so far (trial {leader.number if leader else '–'})")
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"shape": "hv", "color": BEST},
                                 name=name, hoverinfo="skip"))
    _marks(fig, ranking, lambda t: t.number, lambda t: t.score)
    fig.add_hline(y=1.0, line={"dash": "dot", "color": BASELINE, "width": 1})
    _layout(fig, "Optimization history (dotted line: the baseline's score, 1.0)", "trial", "score")
    # whole trials
    fig.update_xaxes(tickmode="linear", dtick=max(1, len(ranking.trials) // 20), tickformat="d")
    return fig


def best_so_far(ranking: Ranking) -> tuple[list[int], list[float]]:
    """The highest score of a rankable trial up to each measured trial (the step line of the history
    plot)."""
    measured = [t for t in ranking.trials if t.outcome is Outcome.MEASURED and t.score is not None]
    xs: list[int] = []
    ys: list[float] = []
    best = float("-inf")
    for t in sorted(measured, key=lambda t: t.number):
        if t.rankable and (t.score or 0.0) > best:
            best = t.score or 0.0
        if best > float("-inf"):
            xs.append(t.number)
            ys.append(best)
    if xs:
        xs.append(max(t.number for t in ranking.trials))
        ys.append(ys[-1])
    return xs, ys


def speeds(ranking: Ranking) -> go.Figure | None:
    """Lowest vs highest concurrency (C=1 vs C=64) with the Pareto front and iso-score lines of the
    weights."""
    if len(ranking.concurrencies) < 2:
        return None
    low, high = ranking.concurrencies[0], ranking.concurrencies[-1]
    points = [t for t in ranking.trials if t.outcome is Outcome.MEASURED
              and t.value(low) is not None and t.value(high) is not None]
    if not points:
        return None
    fig = go.Figure()
    for kind, name in (("feasible", "feasible"),
                       ("infeasible", "infeasible (constraint violated)")):
        group = [t for t in points if _kind(t) == kind]
        _points(fig, group, ranking, kind, [t.value(low) for t in group],
                [t.value(high) for t in group], name)
    front = _pareto([t for t in points if t.feasible], low, high)
    if len(front) > 1:
        fig.add_trace(go.Scatter(x=[t.value(low) for t in front], y=[t.value(high) for t in front],
                                 mode="lines", line={"color": FEASIBLE, "width": 1},
                                 name="Pareto front (feasible)", hoverinfo="skip"))
    _iso_score_lines(fig, ranking, low, high, points)
    _marks(fig, ranking, lambda t: t.value(low), lambda t: t.value(high))
    return _layout(
        fig, f"C={low} vs C={high}: every measured trial, the Pareto front, lines of equal score",
        phase_label(low), phase_label(high), height=520)


def _pareto(trials: Sequence[TrialView], low: int, high: int) -> list[TrialView]:
    """Trials no other beats at both concurrencies, by the first's value."""
    ordered = sorted(trials, key=lambda t: (-(t.value(low) or 0.0), -(t.value(high) or 0.0)))
    front, best_high = [], float("-inf")
    for t in ordered:
        if (t.value(high) or 0.0) > best_high:
            front.append(t)
            best_high = t.value(high) or 0.0
    return front


def _iso_score_lines(fig: go.Figure, ranking: Ranking, low: int, high: int,
                     points: Sequence[TrialView]) -> None:
    """Lines of equal score: w_l·x/ref_l + w_h·y/ref_h = s (only when these two phases carry all the
    weight)."""
    scorer = ranking.scorer
    weights = scorer.normalized_weights
    if set(weights) - {low, high}:
        return
    w_l, w_h = weights.get(low, 0.0), weights.get(high, 0.0)
    r_l, r_h = scorer.reference(low), scorer.reference(high)
    xs = [t.value(low) or 0.0 for t in points]
    x0, x1 = min(xs) * 0.9, max(xs) * 1.1
    best = ranking.best.score if ranking.best is not None else None
    for s in sorted({1.0, *([round(best, 3)] if best is not None else [])}):
        label = f"score {s:.3f} " + ("(best)" if best is not None and abs(s - best) < 1e-3
                                     else "(baseline)")
        colour = BEST if label.endswith("(best)") else BASELINE
        if w_h > 0:
            line_x, line_y = [x0, x1], [r_h * (s - w_l * x / r_l) / w_h for x in (x0, x1)]
        elif w_l > 0:
            ys = [t.value(high) or 0.0 for t in points]
            line_x, line_y = [s * r_l / w_l] * 2, [min(ys), max(ys)]
        else:
            return
        fig.add_trace(go.Scatter(x=line_x, y=line_y, mode="lines", name=label, hoverinfo="skip",
                                 line={"dash": "dash", "color": colour, "width": 1}))


def latencies(ranking: Ranking) -> go.Figure | None:
    """TTFT p50 and ITL mean of every measured trial, one panel each, one colour per phase."""
    measured = [t for t in ranking.trials if t.outcome is Outcome.MEASURED and t.metrics]
    if not measured:
        return None
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT p50 (ms)", "ITL mean (ms)"))
    colours = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b"]
    for index, c in enumerate(ranking.concurrencies):
        for col, metric in ((1, "ttft_p50_ms"), (2, "itl_mean_ms")):
            group = [t for t in measured if t.metrics.get(c, {}).get(metric) is not None]
            fig.add_trace(go.Scatter(
                x=[t.number for t in group], y=[t.metrics[c][metric] for t in group],
                error_y=_interval_bars([t.metrics[c] for t in group], metric),
                mode="markers", name=f"C={c}", legendgroup=f"C={c}", showlegend=col == 1,
                marker={"color": colours[index % len(colours)], "symbol": "circle", "size": 9},
                text=[hover(t, ranking) for t in group],
                hovertemplate="%{y:.0f} ms<br>%{text}<extra></extra>"), row=1, col=col)
    _layout(fig,
            "Latency per trial, bars: 95 % intervals over the phase's requests (lower is better; "
            "log scale: C=1 and the highest concurrency differ by orders of magnitude)", "trial",
            "ms (log scale)")
    fig.update_xaxes(tickformat="d")
    fig.update_yaxes(type="log")
    return fig


def _interval_bars(phases: Sequence[Mapping[str, Any]], metric: str) -> dict[str, Any]:
    """Plotly's asymmetric error bars from each phase's stored ``<metric>_ci`` (none: a study stored
    before latency intervals)."""
    above, below = [], []
    for phase in phases:
        value, interval = float(phase[metric]), phase.get(f"{metric}_ci")
        low, high = (interval if isinstance(interval, list | tuple) and len(interval) == 2
                     else (value, value))
        above.append(float(high) - value)
        below.append(value - float(low))
    return {"type": "data", "symmetric": False, "array": above, "arrayminus": below,
            "visible": any(above) or any(below), "thickness": 1}


def importances(ranking: Ranking, tuned_flags: Sequence[str]) -> go.Figure | None:
    found = importance_values(ranking, tuned_flags)
    if found is None:
        return None
    values, n = found
    names = sorted(values, key=lambda f: values[f])
    fig = go.Figure(go.Bar(x=[values[f] for f in names], y=names, orientation="h",
                           marker={"color": FEASIBLE},
                           name="importance", hovertemplate="%{y}: %{x:.2f}<extra></extra>"))
    caveat = f" — only {n} trials: a rough guide" if n < IMPORTANCE_MIN_TRIALS else ""
    return _layout(fig,
                   f"Importance of each flag for the score ({n} feasible measured trials){caveat}",
                   "importance (fANOVA, sums to 1)", "", height=120 + 45 * len(names))


def failure_counts(ranking: Ranking) -> Counter[str]:
    """Why trials could not be the answer, by class; reused duplicates are not counted twice."""
    return Counter(t.failure for t in ranking.trials if t.failure is not None
                   and t.outcome is not Outcome.DUPLICATE)


def failure_axes(ranking: Ranking, tuned_flags: Sequence[str]) -> tuple[str, str] | None:
    """Two numeric tuned flags to place failures over: memory fraction × CUDA-graph size when both
    are tuned."""
    # The graph size under the name the study's SGLang release gives it (--cuda-graph-max-bs up to
    # 0.5.10).
    graph = next((s for s in versions.same_setting(MEMORY_AXES[1]) if s in tuned_flags), None)
    if MEMORY_AXES[0] in tuned_flags and graph is not None:
        return MEMORY_AXES[0], graph
    numeric = [f for f in tuned_flags
               if any(isinstance(_value_of(t, f), int | float) for t in ranking.trials)]
    return (numeric[0], numeric[1]) if len(numeric) >= 2 else None


def _value_of(t: TrialView, flag: str) -> Any:
    return t.tuned.get(flag, t.record.params_decoded.get(flag))


def failures(ranking: Ranking, tuned_flags: Sequence[str]) -> go.Figure | None:
    """Where failures happen: every trial over two flags (e.g. mem-fraction × CUDA-graph size), by
    class."""
    counts = failure_counts(ranking)
    if not counts:
        return None
    axes = failure_axes(ranking, tuned_flags)
    # trials that ended: one still waiting in the queue (or running) has neither failed nor not
    ended = [t for t in ranking.trials if t.ended
             and t.outcome is not Outcome.TAKEN]  # taken: another worker's to measure
    title = (f"Failures: {', '.join(f'{k} {n}' for k, n in counts.most_common())} of "
             f"{len(ended)} trials")
    if axes is None:
        labels = sorted(counts, key=lambda k: (-counts[k], k))
        fig = go.Figure(go.Bar(x=[counts[k] for k in labels], y=labels, orientation="h",
                               marker={"color": FAILED}))
        return _layout(fig, title, "trials", "")
    fx, fy = axes
    fig = go.Figure()
    trials = [t for t in ended if t.outcome is not Outcome.DUPLICATE
              and _value_of(t, fx) is not None and _value_of(t, fy) is not None]
    ok = [t for t in trials if t.failure is None]
    symbols = ["triangle-down", "square", "diamond", "cross", "triangle-up", "x"]
    classes = sorted(counts, key=lambda k: (-counts[k], k))
    # "no failure" takes a place of its own beside the classes: a trial that failed and its
    # successful re-run at the same point must both show
    slots = len(classes) + 1
    every = [_value_of(t, fx) for t in trials]
    _points(fig, ok, ranking, "feasible", [_dodge(_value_of(t, fx), 0, slots, every) for t in ok],
            [_value_of(t, fy) for t in ok], "no failure")
    for index, cls in enumerate(classes):
        group = [t for t in trials if t.failure == cls]
        # Trials of one class at one point are one marker, sized and labelled by their count;
        # classes at one point sit side by side (a small offset per class), so no failure hides
        # another.
        spots: dict[tuple[Any, Any], list[TrialView]] = {}
        for t in group:
            spots.setdefault((_value_of(t, fx), _value_of(t, fy)), []).append(t)
        xs = [_dodge(x, index + 1, slots, every) for x, _ in spots]
        fig.add_trace(go.Scatter(
            x=xs, y=[y for _, y in spots], mode="markers+text", name=f"{cls} ({counts[cls]})",
            text=[f"×{len(ts)}" if len(ts) > 1 else "" for ts in spots.values()],
            textposition="top center", marker={"color": FAILED if index == 0 else INFEASIBLE,
                    "symbol": symbols[index % len(symbols)],
                    "size": [11 + 3 * (len(ts) - 1) for ts in spots.values()]},
            hovertext=["<br>---<br>".join(hover(t, ranking) for t in ts) for ts in spots.values()],
            hovertemplate="%{hovertext}<extra></extra>"))
    return _layout(fig, title, fx, fy)


def _dodge(x: Any, index: int, classes: int, every: Sequence[Any]) -> Any:
    """``x`` moved a little sideways for the ``index``-th of ``classes`` failure classes (numeric
    axes only)."""
    numbers = [v for v in every if isinstance(v, int | float) and not isinstance(v, bool)]
    if classes < 2 or not isinstance(x, int | float) or isinstance(x, bool) or not numbers:
        return x
    span = (max(numbers) - min(numbers)) or 1.0
    return x + (index - (classes - 1) / 2) * 0.02 * span
