"""``spectune confirm``: re-measure chosen trials against the baseline on fresh restarts, after the
study.

A re-weighting (``best --weights``) or an extra constraint can make a trial lead that the
confirmation stage at the end of ``tune`` never re-measured; the answer then stays the confirmed one
and the leader is named beside it (tuner/query/winner.py). This command confirms it: the trials and
the baseline are redeployed ``repeats`` times each, interleaved, by the confirmation stage's own
code (tuner/run/confirm.py), and the runs are stored in the study, where every surface's winner rule
reads them. The baseline's new runs replace its old ones (they were measured beside these trials);
trials confirmed earlier keep their runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import optuna
from rich.console import Console

from tuner.core.console import make_console
from tuner.core.defaults import DEFAULT_REPEATS
from tuner.core.errors import UsageError
from tuner.core.interrupts import deferred, interruptible
from tuner.query.answers import explanation, ranking_for
from tuner.query.load import StudyNotFound, open_stored_study
from tuner.query.ranking import Ranking
from tuner.query.winner import leader_text
from tuner.run import confirm as stage
from tuner.run.trial import TrialRunner
from tuner.store.confirmed import ConfirmationStage, store_stage, stored_stage
from tuner.store.storage import study_lock
from tuner.study.hosts import hosts_of, spec_for_host
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec
from tuner.targets.base import Target


@dataclass(frozen=True)
class ConfirmOutcome:
    trials: tuple[int, ...]  # the trials re-measured (the baseline last)
    ranking: Ranking  # the study under the same weights and constraints, with the new runs
    lines: tuple[str, ...]  # the answer in words: figures, verdict, an unconfirmed leader left


def parse_trials(text: str | None) -> tuple[int, ...] | None:
    """``3,7`` → (3, 7); a bad list is a usage error naming the option."""
    if text is None:
        return None
    # each part a number: "1,,2" or "1," is a slip, not a list of two
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdecimal() for part in parts):
        raise UsageError(f"--trials: {text!r} is not a list of trial numbers such as 3,7")
    numbers = tuple(int(part) for part in parts)
    repeated = sorted({n for n in numbers if numbers.count(n) > 1})
    if repeated:
        raise UsageError(f"--trials: {text!r} names trial {', '.join(map(str, repeated))} twice; "
                         "--repeats sets how many fresh runs each gets")
    return numbers


def choose(ranking: Ranking, asked: Sequence[int] | None,
           name: str) -> tuple[list[int], int | None]:
    """The trials to confirm (``asked``, else the unconfirmed leader, else the highest-scoring
    candidate other than the baseline) and the baseline; a trial that cannot be confirmed is an
    error before the target is touched."""
    by_number = {t.number: t for t in ranking.trials}
    baseline = next((t.number for t in ranking.trials if t.record.baseline
                     and t.record.is_benchmarked), None)
    if asked is None:
        pick = ranking.unconfirmed_leader or next(
            (t for t in ranking.ranked if t.number != baseline), None)
        if pick is None:
            raise StudyNotFound(
                f"study {name!r} has no candidate to confirm under these weights and constraints")
        asked = [pick.number]
    for number in asked:
        view = by_number.get(number)
        if view is None:
            raise StudyNotFound(f"--trials: study {name!r} has no trial {number}")
        if view.config is None or not view.record.is_benchmarked:
            raise StudyNotFound(
                f"--trials: trial {number} was never measured on the server ({view.status}): "
                "there is nothing to confirm")
    chosen = [n for n in dict.fromkeys(asked) if n != baseline]
    if not chosen:
        raise StudyNotFound(
            f"--trials: trial {baseline} is the baseline; name a trial to confirm against it")
    return chosen, baseline


def run_confirm(spec: StudySpec, *, weights: str | None = None, constraints: tuple[str, ...] = (),
                trials: Sequence[int] | None = None, repeats: int = DEFAULT_REPEATS,
                console: Console | None = None, target: Target | None = None) -> ConfirmOutcome:
    console = console or make_console(stderr=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    stored = open_stored_study(spec)
    ranking = ranking_for(stored, weights, constraints)
    chosen, baseline = choose(ranking, trials, spec.study.name)
    order = [*chosen, *([baseline] if baseline is not None else [])]
    study = stored.study
    with study_lock(spec.study.storage):
        if target is None:
            from tuner.study.target import make_target

            target = make_target(spec_for_host(spec, hosts_of(spec)[0]))
        finished = False
        previous = stored_stage(study)
        try:
            with interruptible():
                from tuner.app.preflight import run_preflight
                from tuner.run.measure import TargetMeasurer

                space = SearchSpace(spec, spec.option_table)
                checked = run_preflight(target, spec, space, say, study)
                table = checked.table or spec.option_table
                measurer = TargetMeasurer(target, spec.benchmark, say=say)
                runner = TrialRunner(spec, space, measurer)
                say(f"confirm: trial(s) {', '.join(map(str, chosen))} against the baseline "
                    f"(trial {baseline}), {repeats} fresh restart(s) each, interleaved")
                # A lambda, not a def: one line.
                on_run: Callable[[int, int], None] = lambda number, run: say(  # noqa: E731
                    f"  fresh run {run + 1}/{repeats}: trial {number}")
                try:
                    stage.measure_stage(study, spec, runner, measurer, order, baseline, repeats,
                                        on_run)
                finally:
                    _keep_earlier(study, previous)
                ranking = ranking_for(open_stored_study(spec), weights, constraints)
                answer = ranking.best
                with deferred():
                    from tuner.app.tune import _finish

                    _finish(spec, target, answer.record if answer else None, table, console,
                            quiet=True)
                    finished = True
        except BaseException:
            if not finished:
                with deferred():
                    try:
                        target.restore()
                    except Exception as exc:  # keep the first error; say the restore's
                        say(f"could not restore the target: {exc}")
            raise
        finally:
            target.close()
    return ConfirmOutcome(tuple(order), ranking, tuple(_answer_lines(ranking, spec)))


def _keep_earlier(study: optuna.Study, previous: ConfirmationStage | None) -> None:
    """Put back the runs of trials confirmed earlier and not re-measured now (the stage stores only
    its own)."""
    current = stored_stage(study)
    if previous is None or current is None or current == previous:
        return
    store_stage(study, current.keeping(previous))


def _answer_lines(ranking: Ranking, spec: StudySpec) -> list[str]:
    answer = ranking.best
    if answer is None:
        return ["no candidate qualifies under these weights and constraints"]
    measured = sum(1 for t in ranking.trials if t.record.is_benchmarked)
    lines = explanation(ranking, answer, measured)
    leader = leader_text(ranking, spec.path)
    return [*lines, *([leader] if leader else [])]
