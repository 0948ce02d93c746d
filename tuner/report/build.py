"""Writing a study's report: rank once, draw each plot, write one self-contained HTML page,
summary.md (the answer as SGLang's auto_benchmark users expect it: launch command, drop-in,
per-phase table) and trials.csv."""

from __future__ import annotations

import csv
import io
import os
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuner.core.errors import SpectuneError, UsageError
from tuner.query.answers import no_answer, ranking_for, require_trials
from tuner.query.caveats import collapse_caveats
from tuner.query.comparison import comparison_table
from tuner.query.effective import changes, comment_lines
from tuner.query.export import launch_for
from tuner.query.load import StoredStudy, open_stored_study
from tuner.query.ranking import Ranking, TrialView
from tuner.query.speculation import comparison_lines
from tuner.query.table import TrialRow, fmt, pm, rows, sort_rows
from tuner.query.winner import answer_status, confirm_command, leader_text, weights_text
from tuner.report import figures
from tuner.report.page import PageContent, Plot, render
from tuner.report.steps import steps_table
from tuner.store.keys import StudyKey
from tuner.store.record import Outcome
from tuner.store.storage import redact
from tuner.targets.unit_file import render_dropin

PAGE = "index.html"
SUMMARY = "summary.md"
TRIALS_CSV = "trials.csv"


@dataclass(frozen=True)
class ReportResult:
    page: Path
    files: tuple[Path, ...]  # summary.md and trials.csv
    notes: tuple[str, ...]


def write_report(study_file: str | Path, output: str | Path, weights: str | None = None,
                 constraints: tuple[str, ...] = ()) -> ReportResult:
    stored = open_stored_study(study_file)
    spec = stored.spec
    ranking = ranking_for(stored, weights, constraints)
    require_trials(stored, ranking)
    out = Path(output)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"-o: cannot create {out}: {exc.strerror or exc}") from None
    flags = [p.flag for p in spec.search]
    best = ranking.best
    low, high = ranking.concurrencies[0], ranking.concurrencies[-1]
    found = figures.importance_values(ranking, flags)
    few = found is not None and found[1] < figures.IMPORTANCE_MIN_TRIALS
    plots = [
        _plot("history", "Optimization history", figures.history(ranking),
              "Score of each measured trial under weights " + weights_text(ranking)
              + " (hover a point: trial, "
              "flags, figures). Grey crosses violate a constraint, red triangles were rejected or "
              "failed to start; the star is the baseline, the green ring the best, the green line "
              "the best so far.",
              "No measured trial yet."),
        _plot("speeds", f"C={low} vs C={high}", figures.speeds(ranking),
              "Every measured trial (grey: infeasible). The Pareto front joins the trials no "
              f"other beats at both C={low} and C={high}; dashed lines are configurations of equal "
              "score under these weights.",
              "Needs two phases with measurements."),
        _plot("latencies", "Latency", figures.latencies(ranking),
              "Time to first token (median) and inter-token latency (mean) of each measured trial, "
              "per phase.",
              "No measured trial yet."),
        _plot("importances", "Parameter importances", figures.importances(ranking, flags),
              "Optuna's importance evaluator (fANOVA) over the feasible measured trials and the "
              "decoded flag values: how much of the score's variation each tuned flag explains."
              + (f" With fewer than {figures.IMPORTANCE_MIN_TRIALS} trials these are a rough "
                 "guide: a flag the sampler rarely varied can look unimportant." if few else ""),
              "Too few feasible measured trials (or no flag varied) to estimate."),
        _plot("failures", "Failures", figures.failures(ranking, flags),
              "Every trial placed by two of its flags and coloured by why it could not be the "
              "answer (duplicates of a failed trial are not counted again): where out-of-memory "
              "starts, for instance.",
              "No trial failed."),
    ]
    table = rows(ranking, flags)
    top = sort_rows(table, "score", flags, ranking.concurrencies)
    measured = [t for t in ranking.trials if t.outcome is Outcome.MEASURED]
    summary = (
        ("study", f"{spec.study.name} ({spec.path.name}, storage {redact(spec.study.storage)})"),
        ("trials", f"{len(ranking.trials)} in all, {len(measured)} measured, "
                   f"{sum(1 for t in measured if t.feasible)} feasible"),
        ("weights", weights_text(ranking)),
        ("references",
         ", ".join(f"C={c}: {v:.1f} tok/s" for c, v in sorted(ranking.references.items()))
         + " (score 1.0)"),
        ("constraints",
         "; ".join(c.text for c in (*spec.objective.constraints, *ranking.constraints)) or "none"),
        ("SGLang", _sglang_text(stored)),
        ("best", best_text(ranking, best)),
        *((("leader", leader),) if (leader := leader_text(ranking, spec.path)) else ()),
        # tuned static vs SGLang's adaptive steps vs off (tuner/query/speculation.py)
        *((("vs SGLang", "; ".join(compared)),) if (compared := comparison_lines(ranking)) else ()),
        ("generated",
         datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),  # noqa: UP017 - explicit
    )
    files = (out / SUMMARY, out / TRIALS_CSV)
    _write(files[0], summary_markdown(stored, ranking))
    _write(files[1], trials_csv(table, ranking))
    import plotly.offline

    content = PageContent(
        title=f"spectune report: {spec.study.name}", summary=summary, warnings=stored.warnings,
        best_command=_best_command(stored, best) if best and best.config else None,
        plots=tuple(plots), steps=steps_table(ranking, ranking.concurrencies), top=tuple(top),
        best_number=best.number if best else None, concurrencies=ranking.concurrencies,
        leader_number=ranking.unconfirmed_leader.number if ranking.unconfirmed_leader else None,
        plotly_js=plotly.offline.get_plotlyjs(), files=tuple(f.name for f in files))
    page = out / PAGE
    _write(page, render(content))
    notes = tuple(f"warning: {w}" for w in stored.warnings)
    return ReportResult(page, files, notes)


class ReportNotWritten(SpectuneError):
    """A file of the report could not be written (a full disk, a folder made read-only): exit 1."""

    exit_code = 1


def _write(path: Path, text: str) -> None:
    """``text`` into ``path`` whole or not at all: written beside it, then renamed over it, so a
    full disk leaves the previous report as it was, not a truncated page."""
    part = path.with_name(f".{path.name}.part")
    try:
        part.write_text(text, encoding="utf-8")
        os.replace(part, path)
    except OSError as exc:
        with suppress(OSError):
            part.unlink()
        raise ReportNotWritten(
            f"-o: cannot write {path}: {exc.strerror or exc} (a report already there is "
            "left as it was)") from None


def _sglang_text(stored: StoredStudy) -> str:
    """Which SGLang judged the configurations: the target's own (its version, found at preflight) or
    the rules."""
    installed = stored.study.user_attrs.get(StudyKey.SGLANG_VERSION)
    if installed:
        return (f"{installed}, installed on the target: it judged each configuration before it was "
                "deployed")
    return (f"{stored.spec.option_table.version}'s option table; SGLang was not asked (not "
            "importable on the target): spectune's rules judged the configurations")


def _best_command(stored: StoredStudy, best: TrialView) -> str:
    """The deployed command, with what SGLang runs differently above it as shell comments."""
    assert best.config is not None
    notes = comment_lines(changes(best.config, best.record.effective))
    return "\n".join([*notes,
                      launch_for(stored.spec, best.config, stored.carried).shell(multiline=True)])


def best_text(ranking: Ranking, best: TrialView | None) -> str:
    """The winner with its 95 % interval, and the confirmation's figures and verdict when the study
    has them."""
    if best is None:
        return "none yet"
    text = f"trial {best.number} ({answer_status(ranking)})"
    if best.score is not None:
        text += f", score {best.score:.3f}" + pm(best.interval, 3)
    verdict = ranking.verdict
    if verdict is not None:
        text += (f"; confirmed {fmt(best.confirmed_score, 3)}{pm(best.confirmed_interval, 3)} over "
                 f"{best.confirmed_runs} fresh run(s); {verdict.explain()}")
    found = changes(best.config, best.record.effective)
    if found:
        text += "; SGLang runs it with " + "; ".join(c.text() for c in found)
    return text


def _plot(key: str, title: str, figure: Any, caption: str, empty_reason: str) -> Plot:
    if figure is None:
        return Plot(key, title, caption, None, empty_reason)
    # The library is inlined once in the page's head; each div only calls it.
    div = figure.to_html(full_html=False, include_plotlyjs=False, div_id=f"plot-{key}",
                         config={"displaylogo": False, "responsive": True})
    return Plot(key, title, caption, f"<div class=\"plot\">{div}</div>")


def summary_markdown(stored: StoredStudy, ranking: Ranking) -> str:
    """The answer in Markdown: which trial, its launch command, a systemd drop-in, the per-phase
    comparison."""
    spec = stored.spec
    best = ranking.best
    lines = [f"# spectune: {spec.study.name}", ""]
    lines += [f"> warning: {w}" for w in stored.warnings]
    if best is None or best.config is None:
        return "\n".join([*lines, f"No answer: {no_answer(stored, ranking)}.", ""])
    baseline = next((t.record for t in ranking.trials if t.record.baseline
                     and t.outcome is Outcome.MEASURED), None)
    launch = launch_for(spec, best.config, stored.carried)
    measured = sum(1 for t in ranking.trials if t.outcome is Outcome.MEASURED)
    # The figure the answer was chosen by: the confirmed score when the confirmation stage judged it
    # (as `spectune best` prints it), else the study's.
    confirmed = ranking.verdict is not None and best.confirmed_score is not None
    value, interval = ((best.confirmed_score, best.confirmed_interval) if confirmed
                       else (best.score, best.interval))
    score = f"{value:.3f}{pm(interval, 3)}" if value is not None else "–"
    runs = f" over {best.confirmed_runs} fresh run(s)" if confirmed else ""
    lines += [
        f"Best: trial {best.number} ({answer_status(ranking)}), score {score}{runs} under weights "
        f"{weights_text(ranking)} (1.0 = the baseline), of {measured} measured trials."]
    if ranking.constraints:
        lines.append(f"Extra constraints: {'; '.join(c.text for c in ranking.constraints)}.")
    lines += _confirmation_lines(ranking, best, spec.path)
    if compared := comparison_lines(ranking):
        lines += ["", "## Compared with SGLang's own choices", "",
                  *(f"- {line}" for line in compared)]
    leader = leader_text(ranking, spec.path)
    if leader is not None:
        lines += ["", f"> {leader[0].upper()}{leader[1:]}"]
    lines += ["", "## Launch command", "", "```sh",
              *comment_lines(changes(best.config, best.record.effective)),
              launch.shell(multiline=True), "```", "",
              "## systemd drop-in", "", "```ini", render_dropin(launch, spec.study.name).rstrip(),
              "```", "", "## Against the baseline", ""]
    table = comparison_table(baseline, best.record)
    cells = [[c.strip() for c in _split(line)] for line in table]
    lines.append("| " + " | ".join(cells[0]) + " |")
    lines.append("|" + "---|" * len(cells[0]))
    lines += ["| " + " | ".join(row) + " |" for row in cells[1:]]
    caveats = collapse_caveats(baseline, best.record, ranking.weights)
    if caveats:
        lines += ["", *(f"> {c}" for c in caveats)]
    return "\n".join([*lines, ""])


def _confirmation_lines(ranking: Ranking, best: TrialView, study_file: Path) -> list[str]:
    """The confirmation's verdict under these weights (or that there was none), for summary.md."""
    verdict = ranking.verdict
    if verdict is None:
        return ["",
                "Confirmation: none under these weights (the highest study score, measured once); "
                f"`{confirm_command(study_file, ranking, best)}` re-measures it against the "
                "baseline."]
    lines = ["", "## Confirmation", "", "| trial | confirmed score ±95% | fresh runs |",
             "|---|---|---|"]
    for t in ranking.trials:
        if t.number in verdict.intervals:
            role = " (baseline)" if t.record.baseline else ""
            lines.append(
                f"| {t.number}{role} | {fmt(t.confirmed_score, 3)}{pm(t.confirmed_interval, 3)} | "
                f"{t.confirmed_runs} |")
    return [*lines, "", f"Verdict: {verdict.explain()}."]


def _split(line: str) -> list[str]:
    """A ``comparison_table`` line back into its four cells (columns are separated by two or more
    spaces)."""
    import re

    parts = re.split(r"\s{2,}", line.strip())
    return [""] * (4 - len(parts)) + parts if len(parts) < 4 else parts


def trials_csv(table: list[TrialRow], ranking: Ranking) -> str:
    """Every trial, one row: flags, per-phase tok/s and latencies, score, status, failure and its
    message."""
    metrics = ("ttft_p50_ms", "ttft_p99_ms", "itl_mean_ms", "error_rate")
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    flags = [f for f, _ in table[0].flags] if table else []
    writer.writerow(["number", "status", *flags, *(f"c{c}_tok_s" for c in ranking.concurrencies),
                     *(f"c{c}_{m}" for c in ranking.concurrencies for m in metrics),
                     "accept_length", "score", "feasible", "answer", "failure", "message",
                     "sglang_runs"])
    views = {t.number: t for t in ranking.trials}
    best, leader = ranking.best, ranking.unconfirmed_leader
    roles = {**({leader.number: "leader, not confirmed"} if leader else {}),
             **({best.number: f"best ({answer_status(ranking)})"} if best else {})}
    for r in table:
        phase = views[r.number].metrics
        writer.writerow([r.number, r.status, *("" if v is None else v for _, v in r.flags),
                         *("" if v is None else f"{v:.3f}" for _, v in r.speeds),
                         *(_cell(phase.get(c, {}).get(m)) for c in ranking.concurrencies
                           for m in metrics),
                         _cell(r.accept_length), _cell(r.score), r.feasible,
                         roles.get(r.number, ""), r.failure or "", r.message or "",
                         "; ".join(c.text() for c in r.changes)])
    return buffer.getvalue()


def _cell(value: Any) -> str:
    return "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
