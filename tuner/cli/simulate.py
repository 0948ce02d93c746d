"""``spectune simulate`` — run the built-in SGLang 0.5.23 simulator as this process.

Everything after ``--`` is handed, unparsed, to the simulator's copy of SGLang's own parser, so
``spectune simulate -- --help`` prints SGLang's help and a bad flag exits 2 with argparse's message.
"""

from __future__ import annotations

import sys

import click


@click.command("simulate", context_settings={"ignore_unknown_options": True})
@click.option("--profile", default=None, metavar="NAME|PATH",
              help="Simulator profile: a shipped name or a TOML file (default: the seed "
                   "deployment).")
@click.option("--time-scale", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True,
              help="Run this many times faster than the real server (startup and generation).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the noise, acceptance and texts.")
@click.argument("server_args", nargs=-1, type=click.UNPROCESSED)
def command(profile: str | None, time_scale: float, seed: int,
            server_args: tuple[str, ...]) -> None:
    """Run the SGLang simulator with the flags of `python -m sglang.launch_server` (after `--`)."""
    from tuner.simulator.run import main

    sys.exit(main(server_args, profile=profile, time_scale=time_scale, seed=seed))
