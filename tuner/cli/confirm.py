"""``spectune confirm STUDY`` — re-measure trials against the baseline on fresh restarts and store
the result."""

from __future__ import annotations

import click

from tuner.core.defaults import DEFAULT_REPEATS


@click.command("confirm")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--weights",
              help="Rank under these weights, e.g. c1=0.2,c64=0.8 (default: the study file's).")
@click.option("--constraint", "constraints", multiple=True,
              help="An extra constraint every candidate must meet, e.g. 'c64.ttft_p99_ms<2000'. "
                   "Repeatable.")
@click.option("--trials", "trials", metavar="N,M",
              help="The trials to confirm (default: the leader under these weights if it was never "
                   "confirmed, else the answer).")
@click.option("--repeats", type=click.IntRange(min=1), default=DEFAULT_REPEATS, show_default=True,
              help="Fresh restarts per configuration (the baseline's included).")
def command(study: str, weights: str | None, constraints: tuple[str, ...], trials: str | None,
            repeats: int) -> None:
    """Re-measure trials and the baseline on fresh restarts, interleaved, and store the runs in the
    study.

    Afterwards best, trials, report and the dashboard judge these trials by their confirmed figures
    (the winner rule: the best lower 95 % bound wins if above the baseline's upper bound). Needs the
    target, like tune; at the end the target is left as [finish] says. Exit codes as tune's.
    """
    from tuner.app.confirm import parse_trials, run_confirm
    from tuner.core.console import make_console
    from tuner.core.interrupts import interruptible
    from tuner.study.load import load_study_file

    spec = load_study_file(study)
    numbers = parse_trials(trials)
    with interruptible(then_exit=True):
        outcome = run_confirm(spec, weights=weights, constraints=constraints, trials=numbers,
                              repeats=repeats, console=make_console(stderr=True))
    for line in outcome.lines:
        click.echo(line)
