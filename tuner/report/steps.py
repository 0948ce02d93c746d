"""The seed document's table, from a study: best speed per ``--speculative-num-steps`` value and
phase.

The seed measured one row per concurrency and one column per steps value (topk=1, draft tokens =
steps+1). A study varies the other flags too, so each cell is the best feasible measured value with
that steps value, and names the trial it came from; "off" is a configuration without speculation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tuner.query.ranking import Ranking
from tuner.store.record import Outcome

STEPS_FLAG = "--speculative-num-steps"
OFF = "off"


@dataclass(frozen=True)
class Cell:
    value: float
    trial: int


@dataclass(frozen=True)
class StepsTable:
    columns: tuple[str, ...]  # steps values as text ("1", "2", …, "off")
    rows: tuple[tuple[int, tuple[Cell | None, ...]], ...]  # (concurrency, one cell per column)


def steps_table(ranking: Ranking, concurrencies: Sequence[int]) -> StepsTable:
    best: dict[tuple[str, int], Cell] = {}
    for t in ranking.trials:
        if t.outcome is not Outcome.MEASURED or not t.feasible:
            continue
        steps = t.config.get(STEPS_FLAG) if t.config is not None else None
        column = str(steps) if steps is not None else OFF
        for c in concurrencies:
            value = t.value(c)
            if value is not None and ((column, c) not in best or value > best[(column, c)].value):
                best[(column, c)] = Cell(value, t.number)
    columns = sorted({col for col, _ in best},
                     key=lambda s: (s == OFF, int(s) if s.isdigit() else 0, s))
    rows = tuple((c, tuple(best.get((col, c)) for col in columns)) for c in concurrencies)
    return StepsTable(tuple(columns), rows)
