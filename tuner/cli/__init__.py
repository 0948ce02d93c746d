"""The ``spectune`` command line: one small module per command, errors become messages here only.

Each command module parses its options and calls one function elsewhere in the package. A
command's module is imported only when that command runs (or ``--help`` lists them all):
``spectune simulate``, started once per trial of a simulated study, does not import SSH, the
targets and Optuna first.

Whatever goes wrong ends in one ``error:`` line and an exit code, never a traceback: a
``SpectuneError`` with its own code, a signal with 130 / 143 (from the first line of start-up on),
click's usage errors with 2, an operating-system error (a full disk, a file that cannot be read)
and, last, anything else (a bug) with 1.
"""

from __future__ import annotations

from tuner.core.interrupts import exit_while_starting

# First of all: a Ctrl-C or SIGTERM while the rest imports (click, then the command's own module)
# ends the program with one line and 130 / 143 — not a KeyboardInterrupt traceback, not a death by
# the signal.
exit_while_starting(program="spectune", module="tuner.cli")

import errno  # noqa: E402
import importlib  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402

import click  # noqa: E402

from tuner import __version__  # noqa: E402
from tuner.core.errors import Interrupted, SpectuneError  # noqa: E402
from tuner.core.faults import fault_point  # noqa: E402
from tuner.core.interrupts import interruptible  # noqa: E402

#: Set (to anything) to see the traceback of an unexpected error besides its one line.
DEBUG_VARIABLE = "SPECTUNE_DEBUG"


#: The commands, in the order ``spectune --help`` lists them; each is ``command`` in the module
#: ``tuner.cli.<name>``.
COMMANDS = ("init", "validate", "schema", "tune", "worker", "confirm", "deploy", "simulate",
            "bench", "best", "trials", "trial", "report", "dashboard")


class SpectuneGroup(click.Group):
    """A click group that turns every error into one ``error:`` line and its exit code, and
    imports a command's module when the command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        command = importlib.import_module(f"tuner.cli.{cmd_name}").command
        assert isinstance(command, click.Command) and command.name == cmd_name, cmd_name
        return command

    def invoke(self, ctx: click.Context) -> object:
        previous_hook = threading.excepthook
        threading.excepthook = _thread_failed
        try:
            # A signal anywhere in a command (its imports included) raises ``Interrupted``; after
            # one, the handlers stay and only count, so a second one cannot change the exit
            # (tuner/core/interrupts.py).
            with interruptible(then_exit=True):
                fault_point("command")
                return super().invoke(ctx)
        except (SpectuneError, Interrupted) as exc:
            if isinstance(exc, Interrupted):
                # the way out after an interrupt: a second signal must not change it
                fault_point("exiting")
            _fail(str(exc).splitlines() or [type(exc).__name__], exc.exit_code)
        # a Ctrl-C where no handler of ours was installed: not click's "Aborted!"
        except KeyboardInterrupt:
            _fail(["interrupted by SIGINT"], 130)
        except (click.exceptions.Exit, click.exceptions.NoArgsIsHelpError):
            raise  # --help, --version: not errors
        except click.Abort:  # a prompt's input ended
            _fail(["aborted"], 1)
        # a usage error of a command: one line, like every other error
        except click.ClickException as exc:
            where = (exc.ctx.command_path if isinstance(exc, click.UsageError) and exc.ctx
                     else ctx.command_path)
            _fail([f"{where}: {exc.format_message()}"], exc.exit_code)
        # the operating system refused (a full disk, a file that cannot be read)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                # the reader of our output left (`| head`): click ends quietly, as every tool does
                raise
            _debug()
            _fail([_os_error(exc)], 1)
        except Exception as exc:  # a bug: still one line, the traceback on request
            _debug()
            _fail([f"unexpected {type(exc).__name__}: {exc} (a bug in spectune; {DEBUG_VARIABLE}=1 "
                   "shows where)"],
                  1)
        finally:
            threading.excepthook = previous_hook
        raise AssertionError("unreachable")

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.NoArgsIsHelpError:
            raise  # not an error: the help
        except click.UsageError as exc:  # e.g. an unknown option of ``spectune`` itself
            _fail([f"{ctx.command_path}: {exc.format_message()}"], exc.exit_code)
            raise AssertionError("unreachable") from None


def _fail(lines: list[str], code: int) -> None:
    for line in lines:
        click.echo(f"error: {line}", err=True)
    sys.exit(code)


def _thread_failed(args: threading.ExceptHookArgs) -> None:
    """A background thread (a progress display, a heartbeat) that died: one line, not the
    interpreter's traceback; the command itself goes on, or ends in its own one line."""
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "a thread"
    click.echo(f"warning: background thread {name} failed: {args.exc_type.__name__}: "
               f"{args.exc_value}", err=True)
    if os.environ.get(DEBUG_VARIABLE):
        traceback.print_exception(args.exc_type, args.exc_value, args.exc_traceback)


def _os_error(exc: OSError) -> str:
    what = exc.strerror or str(exc) or type(exc).__name__
    return f"{exc.filename}: {what}" if exc.filename else what


def _debug() -> None:
    if os.environ.get(DEBUG_VARIABLE):
        traceback.print_exc()


@click.group(cls=SpectuneGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="spectune")
def main() -> None:
    """Tune SGLang speculative-decoding servers with Bayesian optimization."""


# the commands' modules are imported from here on, each when asked for: the start-up window
fault_point("importing")
