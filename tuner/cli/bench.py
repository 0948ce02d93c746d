"""``spectune bench`` — benchmark one running server (owned by the benchmark work; placeholder)."""

from __future__ import annotations

import click


@click.command("bench")
@click.argument("url")
def command(url: str) -> None:
    """Benchmark the SGLang server at URL."""
    raise click.ClickException("the benchmark is not built yet")
