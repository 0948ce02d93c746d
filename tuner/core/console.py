"""The one way commands make a Rich console.

Piped or redirected output (a log file, ``| tee``, CI) has no terminal width; Rich then assumes 80
columns and wraps long lines mid-phrase, which breaks grep and copy-paste of launch commands. Off a
terminal we therefore print at a wide fixed width and let lines run on (``soft_wrap``); on a
terminal Rich fits the window.
"""

from __future__ import annotations

import sys

from rich.console import Console

#: Width used when the stream is not a terminal: wide enough for the trials table of a 6-flag study.
PIPE_WIDTH = 220


def make_console(*, stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    return Console(stderr=stderr, highlight=False, width=None if tty else PIPE_WIDTH,
                   soft_wrap=not tty)
