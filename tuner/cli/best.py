"""``spectune best STUDY`` — the best stored configuration under any weights and constraints."""

from __future__ import annotations

import click


@click.command("best")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--weights",
              help="Re-rank under these weights, e.g. c1=0.7,c64=0.3 (default: the study file's).")
@click.option("--constraint", "constraints", multiple=True,
              help="An extra constraint every candidate must meet, e.g. 'ttft_p99_ms<2000' or "
                   "'c64.error_rate<=0.01'. Repeatable; the study's own constraints always apply.")
@click.option("--format", "fmt", type=click.Choice(["command", "dropin", "json"]),
              default="command",
              show_default=True, help="A launch command to paste, a systemd drop-in, or JSON.")
def command(study: str, weights: str | None, constraints: tuple[str, ...], fmt: str) -> None:
    """Print the best measured configuration of a study, re-ranked from stored metrics (nothing
    re-runs).

    The winner goes to stdout; which trial it is and its score go to stderr.
    """
    from tuner.query.answers import best

    answer = best(study, weights, constraints, fmt)  # type: ignore[arg-type]
    for note in answer.notes:
        click.echo(note, err=True)
    click.echo(answer.output, nl=not answer.output.endswith("\n"))
