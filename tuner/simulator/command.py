"""The command line that starts the built-in simulator with this installation's own spectune."""

from __future__ import annotations

import sys
from pathlib import Path


def spectune_executable() -> list[str]:
    script = Path(sys.executable).parent / "spectune"
    # `python -m tuner.cli` reaches the same click group when the console script is not installed.
    return [str(script)] if script.exists() else [sys.executable, "-m", "tuner.cli"]


def simulator_command(profile: str | None, time_scale: float, seed: int) -> tuple[str, ...]:
    """``spectune simulate [--profile P] --time-scale X --seed N --``: SGLang's flags follow."""
    command = [*spectune_executable(), "simulate"]
    if profile:
        command += ["--profile", profile]
    command += ["--time-scale", repr(float(time_scale)), "--seed", str(seed), "--"]
    return tuple(command)
