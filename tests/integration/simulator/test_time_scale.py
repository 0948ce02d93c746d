"""--time-scale divides startup and generation alike; the seed fixes every chunk's token count.

Load-independent: a busy host can only make the simulator late, never early, so wall-clock durations
are checked from below only; how late it was is the server's own account (``/get_server_info``'s
``simulator``), which must add up, and the chunking is a function of the seed and the time scale
alone."""

from __future__ import annotations

import itertools
import json
import time
import urllib.request
from importlib import resources
from pathlib import Path

import pytest

from tests.integration.simulator.conftest import SPEC
from tuner.simulator.config import resolve
from tuner.simulator.process import http_status, running_simulator
from tuner.simulator.profile import DEFAULT_PROFILE, load_profile
from tuner.simulator.startup import plan_startup

TOKENS = 400
BODY = {"messages": [{"role": "user", "content": "Tell a long story about a lighthouse keeper."}],
        "stream": True, "max_tokens": TOKENS, "temperature": 0, "ignore_eos": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}}


def quick_start_profile(folder: Path) -> str:
    """The default profile with every startup duration divided by 10, so that a low time scale
    (where the generation's real durations dwarf the HTTP overhead) still starts in about a
    second."""
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
    return resources.files("tuner.simulator").joinpath("profiles",
                                                       f"{DEFAULT_PROFILE}.toml").read_text()


def server_schedule(url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{url}/get_server_info", timeout=10) as response:
        schedule: dict[str, float] = json.load(response)["simulator"]
    return schedule


def measure(scale: float, profile: str, log: Path) -> tuple[float, float, list[int], float]:
    """(seconds from the first HTTP answer to ready, seconds of one long generation, its chunk
    sizes, the generation's simulated seconds by the server's account)."""
    with running_simulator([*SPEC, "--max-running-requests", "8"], profile=profile,
                           time_scale=scale, seed=7, log_path=log, wait_ready=False) as sim:
        while http_status(f"{sim.url}/health") is None:
            assert sim.process.poll() is None
            time.sleep(0.002)
        first_answer = time.monotonic()
        while http_status(f"{sim.url}/health") != 200:
            assert sim.process.poll() is None
            time.sleep(0.002)
        startup = time.monotonic() - first_answer
        before = server_schedule(sim.url)
        request = urllib.request.Request(f"{sim.url}/v1/chat/completions",
                                         data=json.dumps(BODY).encode(),
                                         headers={"Content-Type": "application/json"})
        started = time.monotonic()
        with urllib.request.urlopen(request, timeout=60) as response:
            raw = response.read().decode()
        generation = time.monotonic() - started
        after = server_schedule(sim.url)
    assert after["busy_s"] == pytest.approx(after["simulated_s"] / scale + after["dropped_s"],
                                            rel=1e-6)
    chunks = [json.loads(b[6:]) for b in raw.split("\n\n") if b.startswith("data: {")]
    counts = [c["usage"]["completion_tokens"] for c in chunks if c["choices"]
              and c["usage"]["completion_tokens"]]
    sizes = [b - a for a, b in zip([0, *counts], counts, strict=False)]
    return startup, generation, sizes, after["simulated_s"] - before["simulated_s"]


def test_time_scale_divides_startup_and_generation(tmp_path: Path) -> None:
    profile = quick_start_profile(tmp_path)
    prof = load_profile(profile)
    startup_s = plan_startup(prof, resolve(prof, [*SPEC, "--max-running-requests", "8"])).total_s
    slow = measure(5.0, profile, tmp_path / "slow.log")
    fast = measure(50.0, profile, tmp_path / "fast.log")
    # Ready no earlier than the startup script's simulated time / scale (less what passed before the
    # first answer, which only a stall of seconds could make half of it).
    assert slow[0] >= 0.5 * startup_s / 5.0
    # The same requests cost the same simulated time at any scale (the seed fixes the noise and
    # acceptance).
    assert slow[3] == pytest.approx(fast[3], rel=1e-9) and slow[3] > 1.0
    # Never earlier than the schedule: simulated seconds / scale.
    assert slow[1] >= 0.99 * slow[3] / 5.0 and fast[1] >= 0.99 * fast[3] / 50.0
    # The same tokens; at 50× neighbouring chunks coalesce: each of its chunk boundaries is one at
    # 5×.
    assert sum(slow[2]) == sum(fast[2]) == TOKENS and max(slow[2]) > 1
    assert len(fast[2]) < len(slow[2])
    boundaries = set(itertools.accumulate(slow[2]))
    assert set(itertools.accumulate(fast[2])) <= boundaries
