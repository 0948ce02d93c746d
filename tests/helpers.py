"""Shared test helpers (import as tests.helpers). Tests only ever talk to 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
STUDIES = REPO / "studies"


def spectune_command() -> list[str]:
    """The installed console script when present (the real path users take), else the module."""
    script = Path(sys.executable).parent / "spectune"
    return [str(script)] if script.exists() else [sys.executable, "-m", "tuner.cli"]


def require_binary(name: str, *candidates: str) -> str:
    """Path of a system binary the test needs; skip loudly locally, fail under CI=true."""
    for candidate in (name, *candidates):
        found = shutil.which(candidate) or (candidate if os.path.isfile(candidate) else None)
        if found:
            return found
    message = f"system binary {name!r} is not installed (.ci/run installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
