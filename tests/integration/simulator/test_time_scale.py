"""--time-scale divides startup and generation alike; the seed fixes every chunk's token count."""

from __future__ import annotations

import json
import time
import urllib.request
from importlib import resources
from pathlib import Path

import pytest

from tests.integration.simulator.conftest import SPEC
from tuner.simulator.process import http_status, running_simulator
from tuner.simulator.profile import DEFAULT_PROFILE

TOKENS = 400
BODY = {"messages": [{"role": "user", "content": "Tell a long story about a lighthouse keeper."}], "stream": True,
        "max_tokens": TOKENS, "temperature": 0, "ignore_eos": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}}


def quick_start_profile(folder: Path) -> str:
    """The default profile with every startup duration divided by 10, so that a low time scale (where the
    generation's real durations dwarf the HTTP overhead) still starts in about a second."""
    lines, section = [], ""
    for line in _shipped_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped
        elif section == "[startup]" and "=" in stripped:
            key, value = (part.strip() for part in stripped.split("=", 1))
            line = f"{key} = {float(value) / 10}"
        lines.append(line)
    path = folder / "quick-start.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _shipped_text() -> str:
    return resources.files("tuner.simulator").joinpath("profiles", f"{DEFAULT_PROFILE}.toml").read_text()


def measure(scale: float, profile: str, log: Path) -> tuple[float, float, list[int]]:
    """(seconds from the first HTTP answer to ready, seconds of one long generation, its chunk sizes)."""
    with running_simulator([*SPEC, "--max-running-requests", "8"], profile=profile, time_scale=scale, seed=7,
                           log_path=log, wait_ready=False) as sim:
        while http_status(f"{sim.url}/health") is None:
            assert sim.process.poll() is None
            time.sleep(0.002)
        first_answer = time.monotonic()
        while http_status(f"{sim.url}/health") != 200:
            assert sim.process.poll() is None
            time.sleep(0.002)
        startup = time.monotonic() - first_answer
        request = urllib.request.Request(f"{sim.url}/v1/chat/completions", data=json.dumps(BODY).encode(),
                                         headers={"Content-Type": "application/json"})
        started = time.monotonic()
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read().decode()
        generation = time.monotonic() - started
    chunks = [json.loads(b[6:]) for b in raw.split("\n\n") if b.startswith("data: {")]
    counts = [c["usage"]["completion_tokens"] for c in chunks if c["choices"] and c["usage"]["completion_tokens"]]
    sizes = [b - a for a, b in zip([0, *counts], counts, strict=False)]
    return startup, generation, sizes


def test_time_scale_shortens_startup_and_generation_proportionally(tmp_path: Path) -> None:
    profile = quick_start_profile(tmp_path)
    slow = measure(10.0, profile, tmp_path / "slow.log")
    fast = measure(20.0, profile, tmp_path / "fast.log")
    assert slow[0] / fast[0] == pytest.approx(2.0, rel=0.2)
    assert slow[1] / fast[1] == pytest.approx(2.0, rel=0.2)
    # Same seed, same requests in the same order: identical chunks, whatever the time scale.
    assert slow[2] == fast[2] and sum(slow[2]) == TOKENS
    assert max(slow[2]) > 1
