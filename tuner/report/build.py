"""Writing a study's report: rank once, draw each plot, save PNGs, embed them in one HTML page."""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from tuner.core.errors import UsageError
from tuner.engine.record import Outcome
from tuner.engine.storage import redact
from tuner.query.answers import ranking_for, require_trials, weights_text
from tuner.query.export import launch_for
from tuner.query.load import open_stored_study
from tuner.query.ranking import Ranking, TrialView
from tuner.query.table import fmt, pm, rows, sort_rows
from tuner.report import figures
from tuner.report.page import PageContent, Plot, render
from tuner.report.steps import steps_table

PAGE = "index.html"


@dataclass(frozen=True)
class ReportResult:
    page: Path
    images: tuple[Path, ...]
    notes: tuple[str, ...]


def write_report(study_file: str | Path, output: str | Path, weights: str | None = None) -> ReportResult:
    stored = open_stored_study(study_file)
    spec = stored.spec
    ranking = ranking_for(stored, weights)
    require_trials(stored, ranking)
    out = Path(output)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"-o: cannot create {out}: {exc.strerror or exc}") from None
    flags = [p.flag for p in spec.search]
    best = ranking.best
    low, high = ranking.concurrencies[0], ranking.concurrencies[-1]
    plots = [
        _plot("history", "Optimization history", figures.history(ranking),
              "Score of each measured trial under weights " + weights_text(ranking) + "; grey crosses violate a "
              "constraint, red triangles were rejected or failed to start; the green line is the best so far.",
              "No measured trial yet."),
        _plot("speeds", f"C={low} vs C={high}", figures.speeds(ranking),
              f"Every measured trial (grey: infeasible). The Pareto front joins the trials no other beats at both "
              f"C={low} and C={high}; dashed lines are configurations of equal score under these weights.",
              "Needs two phases with measurements."),
        _plot("importances", "Parameter importances", figures.importances(ranking, flags),
              "Optuna's importance evaluator over the feasible measured trials: how much of the score's variation "
              "each tuned flag explains.", "Too few feasible measured trials (or no flag varied) to estimate."),
        _plot("failures", "Failures by class", figures.failures(ranking),
              "Trials that cannot be the answer, by reason (duplicates of a failed trial are not counted again).",
              "No trial failed."),
    ]
    images = []
    for plot in plots:
        if plot.png is not None:
            path = out / f"{plot.key}.png"
            path.write_bytes(plot.png)
            images.append(path)
    top = [r for r in sort_rows(rows(ranking, flags), "score", flags, ranking.concurrencies)]
    measured = [t for t in ranking.trials if t.outcome is Outcome.MEASURED]
    summary = (
        ("study", f"{spec.study.name} ({spec.path.name}, storage {redact(spec.study.storage)})"),
        ("trials", f"{len(ranking.trials)} in all, {len(measured)} measured, "
                   f"{sum(1 for t in measured if t.feasible)} feasible"),
        ("weights", weights_text(ranking)),
        ("references", ", ".join(f"C={c}: {v:.1f} tok/s" for c, v in sorted(ranking.references.items()))
         + " (score 1.0)"),
        ("constraints", "; ".join(c.text for c in spec.objective.constraints) or "none"),
        ("best", best_text(ranking, best)),
        ("generated", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),  # noqa: UP017 - explicit
    )
    content = PageContent(
        title=f"spectune report: {spec.study.name}", summary=summary, warnings=stored.warnings,
        best_command=launch_for(spec, best.config).shell(multiline=True) if best and best.config else None,
        plots=tuple(plots), steps=steps_table(ranking, ranking.concurrencies), top=tuple(top),
        best_number=best.number if best else None, concurrencies=ranking.concurrencies)
    page = out / PAGE
    page.write_text(render(content), encoding="utf-8")
    notes = tuple(f"warning: {w}" for w in stored.warnings)
    return ReportResult(page, tuple(images), notes)


def best_text(ranking: Ranking, best: TrialView | None) -> str:
    """The winner with its 95 % interval, and the confirmation's figures and verdict when the study has them."""
    if best is None:
        return "none yet"
    text = f"trial {best.number}"
    if best.score is not None:
        text += f", score {best.score:.3f}" + pm(best.interval, 3)
    verdict = ranking.verdict
    if verdict is not None:
        text += (f"; confirmed {fmt(best.confirmed_score, 3)}{pm(best.confirmed_interval, 3)} over "
                 f"{best.confirmed_runs} fresh run(s); {verdict.explain()}")
    return text


def _plot(key: str, title: str, figure: object, caption: str, empty_reason: str) -> Plot:
    if figure is None:
        return Plot(key, title, caption, None, empty_reason)
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)  # type: ignore[attr-defined]
    plt.close(figure)  # type: ignore[arg-type]
    return Plot(key, title, caption, buffer.getvalue())
