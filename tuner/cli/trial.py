"""``spectune trial N STUDY`` — everything stored about one trial."""

from __future__ import annotations

import click


@click.command("trial")
@click.argument("number", type=click.IntRange(min=0))
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def command(number: int, study: str, as_json: bool) -> None:
    """Show trial NUMBER of a study: flags requested and deployed, launch command, timings, every
    phase's metrics, constraints, and for a failure its class, message, server log path and log
    tail.

    Exit 2 when the study or the trial does not exist.
    """
    from tuner.query.detail import trial_detail

    answer = trial_detail(study, number, as_json)
    for note in answer.notes:
        click.echo(note, err=True)
    click.echo(answer.output, nl=not answer.output.endswith("\n"))
