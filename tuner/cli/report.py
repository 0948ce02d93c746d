"""``spectune report STUDY -o DIR`` — an HTML report with plots."""

from __future__ import annotations

import click


@click.command("report")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("-o", "--output", "output", required=True,
              type=click.Path(file_okay=False, path_type=str),
              help="Directory for index.html, summary.md and trials.csv (created if missing).")
@click.option("--weights",
              help="Score under these weights, e.g. c1=0.7,c64=0.3 (default: the study file's).")
@click.option("--constraint", "constraints", multiple=True,
              help="An extra constraint every candidate must meet, e.g. 'c64.ttft_p99_ms<2000'. "
                   "Repeatable.")
def command(study: str, output: str, weights: str | None, constraints: tuple[str, ...]) -> None:
    """Write one self-contained HTML page (interactive plots, no network), summary.md and
    trials.csv.

    Optimization history, C=1 vs C=64 with the Pareto front and iso-score lines, the best value per
    speculative steps and concurrency, latencies, parameter importances over the flags, and where
    failures happen. Hover a point for its trial, flags and figures.
    """
    from tuner.report.build import write_report

    result = write_report(study, output, weights, constraints)
    for note in result.notes:
        click.echo(note, err=True)
    click.echo(str(result.page))
