"""The answer of a ranking in words and JSON, shared by every surface (best, trials, report,
dashboard).

The rule itself is ``Ranking.best`` (tuner/query/ranking.py): the winner rule over the confirmed
trials when the study has a confirmation under these weights and constraints, else the highest
score. When other weights or constraints make a trial lead that the confirmation never re-measured,
that leader is named beside the answer — never silently swapped in, never left out — with the
command that confirms it.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from tuner.query.ranking import Ranking, TrialView


def weights_text(ranking: Ranking) -> str:
    """``c1=0.2,c64=0.8``: the weights as used (normalised to sum to 1)."""
    total = sum(ranking.weights.values()) or 1.0
    return ",".join(f"c{c}={w / total:g}" for c, w in sorted(ranking.weights.items()))


def confirm_command(study_file: str | Path, ranking: Ranking, trial: TrialView) -> str:
    """The ``spectune confirm`` command that re-measures ``trial`` against the baseline under this
    ranking."""
    words = ["spectune", "confirm", str(study_file), "--weights", weights_text(ranking),
             *(w for c in ranking.constraints for w in ("--constraint", c.text)), "--trials",
             str(trial.number)]
    return shlex.join(words)


def _figure(trial: TrialView) -> str:
    if trial.score is None:
        return "–"
    return f"{trial.score:.3f}" + (f" {trial.interval.text()}" if trial.interval is not None
                                   else "")


def answer_status(ranking: Ranking) -> str:
    """``confirmed`` (the winner rule over fresh runs chose it) or ``not confirmed`` (the highest
    study score)."""
    return "confirmed" if ranking.verdict is not None else "not confirmed"


def leader_text(ranking: Ranking, study_file: str | Path) -> str | None:
    """One line naming the unconfirmed leader beside the answer, or None when the answer is the
    leader."""
    leader, answer = ranking.unconfirmed_leader, ranking.best
    if leader is None or answer is None:
        return None
    return (f"leader under weights {weights_text(ranking)}: trial {leader.number}, score "
            f"{_figure(leader)} — never confirmed, so the answer stays trial {answer.number} "
            f"(confirmed); `{confirm_command(study_file, ranking, leader)}` re-measures it against "
            "the baseline")


def answer_json(ranking: Ranking) -> dict[str, Any]:
    """The answer as every JSON surface gives it."""
    answer, leader = ranking.best, ranking.unconfirmed_leader
    return {"best": answer.number if answer is not None else None,
            "best_confirmed": ranking.verdict is not None,
            "unconfirmed_leader": leader.number if leader is not None else None,
            "unconfirmed_leader_score": leader.score if leader is not None else None}
