"""One simulator process shared by the endpoint tests of this folder (a fast time scale, metrics
on)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tuner.simulator.process import RunningSimulator, running_simulator

MODEL = "Qwen/Qwen3.5-122B-A10B"
SPEC = ["--model-path", MODEL, "--tp-size", "4", "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "Qwen/Qwen3.5-122B-A10B-EAGLE3",
        "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
FAST = 400.0


@pytest.fixture(scope="session")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSimulator]:
    log = Path(tmp_path_factory.mktemp("sim")) / "simulator.log"
    args = [*SPEC, "--served-model-name", "sim-model", "--max-running-requests", "64",
            "--enable-metrics",
            # one chunk per iteration, even at 400×
            "--decode-log-interval", "5", "--stream-interval", "1"]
    with running_simulator(args, time_scale=FAST, seed=0, log_path=log,
                           ready_timeout_s=30) as server:
        yield server
