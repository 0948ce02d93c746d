"""The final answer of ``spectune tune``: what changed against the baseline, what was left running,
where things are.

Kept apart from tune.py so the run and its presentation change independently. The per-phase table is
tuner/query/comparison.py's (the report's summary.md shows the same one); intervals slot in there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tuner.query.caveats import collapse_caveats
from tuner.query.comparison import comparison_table
from tuner.run.confirm import Verdict
from tuner.store.record import TrialRecord
from tuner.store.storage import redact
from tuner.study.spec import StudySpec


@dataclass(frozen=True)
class Locations:
    """Where a user finds what the run left behind."""

    storage: str
    logs: Path | None
    report: Path | None = None


def finish_text(spec: StudySpec, best: TrialRecord | None) -> str:
    """What ``[finish]`` did to the target, in words."""
    settings = spec.target.settings
    if spec.finish == "best" and best is not None:
        where = "it keeps running" if settings.outlives_spectune else "it stopped with this command"
        return f"target: deployed the best configuration (trial {best.number}) as [finish] " \
               f"deploy = \"best\" says; {where} (spectune deploy --best puts it back any time)"
    if spec.finish == "leave":
        return "target: left as the last trial deployed it ([finish] deploy = \"leave\")"
    if settings.outlives_spectune:
        return f"target: {settings.restored_message()} ([finish] deploy = \"original\")"
    if best is None:  # nothing measured to deploy: never suggest deploying a "best"
        return ("target: the server started for the last trial was stopped ([finish] deploy = "
                "\"original\")")
    return ("target: the server started for the last trial was stopped ([finish] deploy = "
            f"\"original\"); `spectune deploy {spec.path} --best` starts the winner")


def best_lines(best: TrialRecord, baseline: TrialRecord | None, verdict: Verdict | None,
               study: Path | str = "STUDY") -> list[str]:
    """The winner and its score: the confirmed interval when the confirmation stage ran, else the
    study's."""
    # Without a measured baseline, 1.0 is whichever trial measured first: said, never passed off as
    # the baseline.
    scale = f"1.0 = the baseline, trial {baseline.number}" if baseline is not None else \
        "1.0 = the first measured trial: no baseline was measured"
    lines = []
    if verdict is not None and not verdict.significant:
        lines.append("no significant improvement over the baseline")
    confirmed = verdict.intervals.get(best.number) if verdict is not None else None
    if confirmed is not None:
        runs = len(best.confirmed.runs) if best.confirmed else 0
        lines.append(
            f"best: trial {best.number}, confirmed score {confirmed.mid:.3f} {confirmed.text()}"
            f" over {runs} fresh run(s) ({scale})")
        lines += _improvement(best, verdict, study)
        return lines
    score = f"{best.score:.3f}" if best.score is not None else "–"
    interval = f" {best.score_ci.text()}" if best.score_ci else ""
    lines.append(f"best: trial {best.number}, score {score}{interval} ({scale})")
    return lines


def _improvement(best: TrialRecord, verdict: Verdict | None, study: Path | str) -> list[str]:
    """By how much the confirmed winner beats the confirmed baseline, with its interval, and how to
    apply it."""
    if (verdict is None or not verdict.significant or verdict.baseline is None
        or best.number == verdict.baseline):
        return []
    base = verdict.intervals[verdict.baseline]
    mine = verdict.intervals[best.number]
    if base.mid <= 0:
        return []
    # Paired with the baseline's fresh runs (objectives/paired.py), the baseline's confirmed score
    # is exact and the winner's interval is the whole uncertainty of the ratio; otherwise the
    # baseline's own width is added.
    spread = (base.high - base.low) / 2 / base.mid
    low, high = mine.low / base.mid - 1 - spread, mine.high / base.mid - 1 + spread
    return [f"improvement: {mine.mid / base.mid - 1:+.1%} [{low:+.1%}, {high:+.1%}] over the "
            "baseline under the study's weights (95 %, confirmed on fresh restarts paired with the "
            f"baseline's); apply it with `spectune deploy {study} --best`, or the launch command "
            "below"]


def summary_lines(spec: StudySpec, baseline: TrialRecord | None, best: TrialRecord | None,
                  where: Locations, verdict: Verdict | None = None) -> list[str]:
    """Everything after the study line and before the launch command."""
    lines = []
    if best is not None:
        lines += best_lines(best, baseline, verdict, spec.path)
        lines += comparison_table(baseline, best)
        lines += collapse_caveats(baseline, best, spec.objective.weights)
    lines.append(finish_text(spec, best))
    lines.append(
        f"database: {redact(where.storage)} (run the same command to resume; `spectune trials "
        f"{spec.path}` lists every trial)")
    if where.logs is not None:
        lines.append(f"server logs: {where.logs} (`spectune trial N {spec.path}` shows one trial's "
                     "log path and tail)")
    if where.report is not None:
        lines.append(f"report: {where.report.resolve()} (interactive plots; summary.md and "
                     "trials.csv beside it)")
    return lines
