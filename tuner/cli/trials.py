"""``spectune trials STUDY`` — every trial of a study as a table (or JSON)."""

from __future__ import annotations

import shutil

import click


@click.command("trials")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--sort", "sort", default="number", show_default=True, metavar="KEY",
              help="number, score, c1, c64 (a phase's tok/s), accept, status, or a tuned flag "
                   "(e.g. num-steps).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--weights",
              help="Score under these weights, e.g. c1=0.7,c64=0.3 (default: the study file's).")
@click.option("--constraint", "constraints", multiple=True,
              help="An extra constraint every candidate must meet, e.g. 'c64.ttft_p99_ms<2000'. "
                   "Repeatable.")
def command(study: str, sort: str, as_json: bool, weights: str | None,
            constraints: tuple[str, ...]) -> None:
    """List a study's trials: tuned flags, per-phase tok/s, accept length, score, status and why it
    failed.

    ★ marks the answer (the same trial `spectune best` names under the same weights and
    constraints); ☆ a trial that leads under them but was never confirmed.
    """
    from tuner.query.answers import trials

    answer = trials(study, sort, as_json,
                    width=shutil.get_terminal_size((200, 40)).columns,
                    weights=weights, constraints=constraints)
    for note in answer.notes:
        click.echo(note, err=True)
    click.echo(answer.output, nl=not answer.output.endswith("\n"))
