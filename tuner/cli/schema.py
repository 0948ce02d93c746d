"""``spectune schema`` — print the JSON Schema of a study file (for editors; docs/study-file.md)."""

from __future__ import annotations

import click


@click.command("schema")
def command() -> None:
    """Print the JSON Schema of a study file.

    TOML editors (Taplo, Even Better TOML) use it to check and complete study files: put
    `#:schema ./docs/study-file.schema.json` at the top of a study file. docs/study-file.md lists
    every key.
    """
    from tuner.study.reference import schema_text

    click.echo(schema_text(), nl=False)
