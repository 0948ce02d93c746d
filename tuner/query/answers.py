"""The ``best`` and ``trials`` commands as functions: study file in, text out, nothing written.

Each returns the text for stdout plus notes for stderr, so the CLI stays a parser and the answers
are testable without a terminal.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

from objectives.confidence import Interval
from tuner.query.caveats import collapse_caveats
from tuner.query.effective import changes
from tuner.query.export import Format, export, verdict_json
from tuner.query.load import StoredStudy, StudyNotFound, open_stored_study
from tuner.query.options import parse_constraints, parse_weights
from tuner.query.ranking import Ranking, TrialView, rank
from tuner.query.speculation import comparison_lines
from tuner.query.table import fitted, rows, sort_rows
from tuner.query.winner import answer_json, leader_text, weights_text
from tuner.run.confirm import RULE
from tuner.store.record import Outcome

__all__ = ["Answer", "best", "ranking_for", "require_trials", "trials", "verdict_json",
           "weights_text"]


@dataclass(frozen=True)
class Answer:
    output: str  # for stdout: exactly what a user pipes or pastes
    notes: tuple[str, ...] = ()  # for stderr: what the answer rests on, warnings


def ranking_for(stored: StoredStudy, weights: str | None = None,
                constraints: tuple[str, ...] = ()) -> Ranking:
    """Parse the options against this study's phases (bad input fails before anything is read)."""
    spec = stored.spec
    concurrencies = sorted(p.concurrency for p in spec.benchmark.phases)
    parsed_weights = parse_weights(weights, concurrencies) if weights is not None else None
    parsed_constraints = parse_constraints(constraints, concurrencies)
    return rank(stored.study, spec, parsed_weights, parsed_constraints)


def require_trials(stored: StoredStudy, ranking: Ranking) -> None:
    if not ranking.trials:
        raise StudyNotFound(f"study {stored.spec.study.name!r} is empty: it has no trials yet "
                            f"(run `spectune tune {stored.spec.path}`)")


def weights_note(given: str | None, ranking: Ranking) -> str | None:
    """Say so when ``--weights`` do not sum to 1: they are normalised (``c1=0.7`` alone means
    ``c1=1``), and a user who meant "0.7 of the score from C=1" should see what was used instead."""
    if given is None:
        return None
    total = sum(ranking.weights.values())
    if abs(total - 1.0) < 1e-9:
        return None
    return (
        f"note: --weights {given.strip()} sum to {total:g}; normalised to {weights_text(ranking)}")


def no_answer(stored: StoredStudy, ranking: Ranking) -> str:
    """Why there is no answer under this ranking: nothing measured yet, or nothing measured
    qualifies under these constraints and weights (``best``'s error, summary.md's text)."""
    measured = sum(1 for t in ranking.trials if t.outcome is Outcome.MEASURED)
    if not measured:
        return (f"study {stored.spec.study.name!r} has no measured trial yet "
                f"({len(ranking.trials)} trial(s), none benchmarked)")
    every = [c.text for c in stored.spec.objective.constraints] + [c.text
                                                                   for c in ranking.constraints]
    return (f"no measured trial is feasible under these constraints ({'; '.join(every)}) and "
            f"weights {weights_text(ranking)}: {measured} measured, none qualifies")


def best(study_file: str | Path, weights: str | None, constraints: tuple[str, ...],
         fmt: Format) -> Answer:
    stored = open_stored_study(study_file)
    ranking = ranking_for(stored, weights, constraints)
    require_trials(stored, ranking)
    winner = ranking.best
    measured = [t for t in ranking.trials if t.outcome is Outcome.MEASURED]
    if winner is None:
        raise StudyNotFound(no_answer(stored, ranking))
    normalised = weights_note(weights, ranking)
    notes = [*(f"warning: {w}" for w in stored.warnings), *([normalised] if normalised else []),
             *explanation(ranking, winner, len(measured))]
    leader = leader_text(ranking, study_file)
    if leader is not None:
        notes.append(leader)
    if ranking.constraints:
        notes.append("extra constraints: " + "; ".join(c.text for c in ranking.constraints))
    # The command stays as deployed (what SGLang was given); what SGLang runs differently is said
    # beside it.
    notes += [f"SGLang runs trial {winner.number} with: {c.text()}"
              for c in changes(winner.config, winner.record.effective)]
    baseline = next((t.record for t in measured if t.record.baseline), None)
    notes += collapse_caveats(baseline, winner.record, ranking.weights)
    # tuned static vs SGLang's adaptive steps vs off (tuner/query/speculation.py)
    notes += comparison_lines(ranking)
    return Answer(export(stored.spec, ranking, winner, fmt, stored.carried), tuple(notes))


def explanation(ranking: Ranking, winner: TrialView, measured: int) -> list[str]:
    """Why ``winner`` is the answer: its score with its interval, the confirmed figures and the
    winner rule when the study was confirmed, and which configurations it ties with (their intervals
    overlap)."""
    score = f"{winner.score:.3f}{_interval(winner.interval)}" if winner.score is not None else "–"
    notes = [f"trial {winner.number} of {measured} measured: score {score} under weights "
             f"{weights_text(ranking)} "
             "(1.0 = the reference run; [..] = 95 % interval)"]
    verdict = ranking.verdict
    if verdict is not None:
        for t in ranking.trials:
            if t.number in verdict.intervals:
                role = " (baseline)" if t.record.baseline else ""
                notes.append(f"confirmed: trial {t.number}{role} {t.confirmed_score:.3f}"
                             f"{_interval(t.confirmed_interval)} over {t.confirmed_runs} fresh "
                             "run(s)")
        if not verdict.significant:
            notes.append("no significant improvement over the baseline")
        notes.append(f"winner rule ({RULE}): {verdict.explain()}")
        return notes
    if winner.interval is not None:
        ties = [t for t in ranking.ranked if t.number != winner.number and t.interval is not None
                and t.interval.overlaps(winner.interval)]
        if ties:
            listed = ", ".join(f"trial {t.number} ({t.score:.3f}{_interval(t.interval)})"
                               for t in ties[:5])
            more = f" and {len(ties) - 5} more" if len(ties) > 5 else ""
            notes.append(
                f"tie: trial {winner.number} and {listed}{more} have overlapping intervals — the "
                "measurements cannot tell them apart (not confirmed: `spectune confirm` "
                "re-measures them against the baseline)")
    return notes


def _interval(interval: Interval | None) -> str:
    return f" {interval.text()}" if interval is not None else ""


def trials(study_file: str | Path, sort: str = "number", as_json: bool = False, width: int = 200,
           weights: str | None = None, constraints: tuple[str, ...] = ()) -> Answer:
    stored = open_stored_study(study_file)
    ranking = ranking_for(stored, weights, constraints)
    require_trials(stored, ranking)
    flags = [p.flag for p in stored.spec.search]
    table = sort_rows(rows(ranking, flags), sort, flags, ranking.concurrencies)
    best_trial = ranking.best
    if as_json:
        payload = {"study": stored.spec.study.name,
                   "weights": {f"c{c}": w for c, w in ranking.weights.items()},
                   "references": {f"c{c}": v for c, v in ranking.references.items()},
                   **answer_json(ranking), "verdict": verdict_json(ranking),
                   "trials": [r.to_json() for r in table]}
        return Answer(json.dumps(payload, indent=2) + "\n", _notes(stored, ranking, study_file))
    from rich.console import Console

    buffer = io.StringIO()
    leader = ranking.unconfirmed_leader
    rendered, at = fitted(table, ranking.concurrencies,
                          best_trial.number if best_trial else None,
                          leader.number if leader else None, width=width)
    Console(file=buffer, width=at, color_system=None).print(rendered)
    return Answer(buffer.getvalue(), _notes(stored, ranking, study_file))


def _notes(stored: StoredStudy, ranking: Ranking, study_file: str | Path) -> tuple[str, ...]:
    leader = leader_text(ranking, study_file)
    return (*(f"warning: {w}" for w in stored.warnings), *([leader] if leader else []))
