"""``spectune validate STUDY`` — placeholder until the study file lands."""

from __future__ import annotations

import click


@click.command("validate")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
def command(study: str) -> None:
    """Check a study file and show the search space it defines."""
    raise click.ClickException("not built yet")
