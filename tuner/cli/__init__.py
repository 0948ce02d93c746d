"""The ``spectune`` command line: one small module per command, errors become messages here only.

Each command module parses its options and calls one function elsewhere in the package; heavy imports
happen inside the command so ``spectune --help`` stays instant.
"""

from __future__ import annotations

import sys

import click

from tuner import __version__
from tuner.core.errors import Interrupted, SpectuneError
from tuner.core.faults import fault_point


class SpectuneGroup(click.Group):
    """A click group that turns ``SpectuneError`` into a message and its exit code — never a traceback."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (SpectuneError, Interrupted) as exc:
            if isinstance(exc, Interrupted):
                fault_point("exiting")  # the way out after an interrupt: a second signal must not change it
            for line in str(exc).splitlines() or [type(exc).__name__]:
                click.echo(f"error: {line}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:  # a Ctrl-C before a command installed its handlers: not click's "Aborted!"
            click.echo("error: interrupted by SIGINT", err=True)
            sys.exit(130)


@click.group(cls=SpectuneGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="spectune")
def main() -> None:
    """Tune SGLang speculative-decoding servers with Bayesian optimization."""


def _register() -> None:
    from tuner.cli import (
        bench,
        best,
        dashboard,
        deploy,
        init,
        report,
        schema,
        simulate,
        trial,
        trials,
        tune,
        validate,
        worker,
    )

    for module in (init, validate, schema, tune, worker, deploy, simulate, bench, best, trials, trial, report,
                   dashboard):
        main.add_command(module.command)


_register()
