"""Shared test helpers (import as tests.helpers). Tests only ever talk to 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from objectives.records import RequestRecord

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


def faulty_profile(directory: Path, faults: str, name: str = "faulty.toml") -> Path:
    """The default simulator profile with ``faults`` (``[[faults]]`` TOML tables,
    tuner/simulator/faults.py) appended: how a test asks the simulator to fail like SGLang does once
    it is up."""
    from tuner.simulator.profile import DEFAULT_PROFILE, load_profile

    source = Path(load_profile(DEFAULT_PROFILE).source)
    if not source.is_file():
        source = REPO / "tuner" / "simulator" / "profiles" / f"{DEFAULT_PROFILE}.toml"
    path = directory / name
    path.write_text(source.read_text(encoding="utf-8") + "\n" + faults, encoding="utf-8")
    return path


def requests_of(n: int, seed: int = 0) -> list[RequestRecord]:
    """``n`` successful streamed requests: TTFT lognormal around 50 ms, 20 gaps of ~10 ms, 1–4
    tokens a chunk."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        ttft = float(rng.lognormal(np.log(0.05), 0.4))
        gaps = rng.exponential(0.01, size=20)
        tokens = tuple(int(t) for t in rng.integers(1, 5, size=21))
        times = tuple(float(t) for t in ttft + np.concatenate([[0.0], np.cumsum(gaps)]))
        out.append(RequestRecord(index=i, start_s=0.0, end_s=times[-1], chunk_times_s=times,
                                 chunk_tokens=tokens, output_tokens=sum(tokens)))
    return out
