"""``spectune simulate`` — run the built-in SGLang simulator (owned by the simulator work; placeholder)."""

from __future__ import annotations

import click


@click.command("simulate", context_settings={"ignore_unknown_options": True})
@click.argument("server_args", nargs=-1, type=click.UNPROCESSED)
def command(server_args: tuple[str, ...]) -> None:
    """Run the SGLang simulator with the flags of `python -m sglang.launch_server`."""
    raise click.ClickException("the simulator is not built yet")
