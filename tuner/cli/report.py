"""``spectune report STUDY -o DIR`` — an HTML report with plots."""

from __future__ import annotations

import click


@click.command("report")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("-o", "--output", "output", required=True, type=click.Path(file_okay=False, path_type=str),
              help="Directory for index.html and the PNGs (created if missing).")
@click.option("--weights", help="Score under these weights, e.g. c1=0.7,c64=0.3 (default: the study file's).")
def command(study: str, output: str, weights: str | None) -> None:
    """Write one self-contained HTML page (plots embedded) plus each plot as a PNG.

    Optimization history, C=1 vs C=64 with the Pareto front and iso-score lines, the best value per
    speculative steps and concurrency, parameter importances, and failures by class.
    """
    from tuner.report.build import write_report

    result = write_report(study, output, weights)
    for note in result.notes:
        click.echo(note, err=True)
    click.echo(str(result.page))
