"""The searches a tuner is measured against, and the curve that compares them.

Public (docs/benchmarks.md): ``random_search`` — the baseline, then random points, without the
designed start (a user's hand-run random search); ``sweep_search`` — the seed campaign's manual
method: one flag at a time from the baseline, the others held at the incumbent; ``found_so_far`` —
the truth of each search's own pick after every measured trial, as a share of the optimum. All run
on a ``Landscape`` through the product's ``TrialRunner``, so failed starts, run failures and
constraints count exactly as in ``evaluate_search``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import optuna
from rich.console import Console
from rich.progress import track

from tuner.evaluation.landscape import Landscape, SearchResult, evaluate_search, is_landscape
from tuner.evaluation.landscape_plugin import study_of
from tuner.run.measurer import Measurer
from tuner.run.trial import TrialRunner
from tuner.store.record import TrialRecord, best_of, measured_records
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec


def random_search(study: StudySpec | str | Path | None, landscape: Landscape | Measurer, *,
                  n_trials: int, seed: int = 0) -> SearchResult:
    """The baseline, then uniformly random configurations (no designed start): what a user would run
    by hand."""
    return evaluate_search(study, landscape, n_trials=n_trials, seed=seed, sampler="random",
                           designed_start=False)


def sweep_search(study: StudySpec | str | Path | None, landscape: Landscape | Measurer, *,
                 n_trials: int, seed: int = 0) -> SearchResult:
    """One flag at a time, in the space's order: every value of the flag with the others at the
    incumbent, keep the best, next flag; rounds until ``n_trials`` were measured or a whole round
    measured nothing new (``stopped_by`` "exhausted"). Every phase is measured (a person sweeping by
    hand skips none)."""
    spec = study_of(landscape, study)
    space = SearchSpace(spec, spec.option_table)
    measurer = landscape.measurer(seed) if is_landscape(landscape) else landscape
    optuna_study = optuna.create_study(direction="maximize", study_name=f"{spec.study.name}-sweep")
    runner = TrialRunner(spec, space, measurer, skip_phases=False)
    measured = 0
    seen: dict[str, float] = {}

    def evaluate(params: dict[str, Any]) -> float:
        nonlocal measured
        optuna_study.enqueue_trial(params)  # the runner then measures exactly these parameters
        optuna_study.optimize(runner, n_trials=1)
        record = TrialRecord.from_stored(optuna_study.trials[-1])
        measured += record.is_measured
        score = record.values[0] if record.values else float("-inf")
        return score if record.feasible else float("-inf")

    current = space.encode(spec.baseline)
    stopped_by = "n_trials"
    while measured < n_trials:
        before = measured
        for dim in space.dimensions:
            scores: dict[Any, float] = {}
            for value in dim.encoded_values():
                if measured >= n_trials:
                    break
                candidate = dict(current, **{dim.name: value})
                proposal = space.decode(candidate)
                if proposal.config is None:
                    continue
                key = proposal.config.key()
                if key not in seen:
                    seen[key] = evaluate(candidate)
                scores[value] = seen[key]
            if scores:
                current[dim.name] = max(scores, key=lambda v: scores[v])
            if measured >= n_trials:
                break
        if measured == before:
            stopped_by = "exhausted"  # converged: every neighbour of the incumbent measured
            break
    return SearchResult(spec, optuna_study, stopped_by, best_of(measured_records(optuna_study)))


def found_so_far(result: SearchResult, truth: Landscape | Mapping[str, float],
                 n_trials: int | None = None
                 ) -> list[float]:
    """True score of the search's own pick after each measured trial ÷ the optimum (0 before
    anything feasible); ``truth``: a landscape (``truth_table`` of it over the searched study) or
    config key → true score. Padded with its last value to ``n_trials`` (a search that stopped
    early keeps its pick)."""
    table = truth if isinstance(truth, Mapping) else truth_table(truth, result.spec)
    optimum = max(table.values()) if table else 0.0
    ratios: list[float] = []
    for k in range(1, result.measured + 1):
        best = result.best_after(k)
        score = table.get(best.config.key(),
                          0.0) if best is not None and best.config is not None else 0.0
        ratios.append(score / optimum if optimum > 0 else 0.0)
    length = max(n_trials or 0, len(ratios))
    return ratios + [ratios[-1] if ratios else 0.0] * (length - len(ratios))


def truth_table(landscape: Landscape, study: StudySpec, *,
                progress: bool = False) -> dict[str, float]:
    """Config key → true score of every distinct valid configuration of ``study``'s space that can
    be the answer: the landscape's own ``true_scores()`` where it has one, else its
    ``true_score`` (the ``Landscape`` protocol) asked for each. ``progress``: a progress bar on
    stderr. A full pass over the space: keep the table where it is needed more than once."""
    known = getattr(landscape, "true_scores", None)
    if callable(known):
        try:
            return dict(known(progress=progress))
        except TypeError:  # a landscape's own true_scores() without the progress option
            return dict(known())
    space = SearchSpace(study, study.option_table)
    points: Iterable[dict[str, Any]] = space.points()
    if progress:
        points = track(points, total=space.raw_size(), description="truth: every configuration",
                       console=Console(stderr=True), transient=True)
    scores: dict[str, float] = {}
    for params in points:
        config = space.decode(params).config
        if config is not None and config.key() not in scores:
            score = landscape.true_score(config)
            if score is not None:
                scores[config.key()] = score
    return scores
