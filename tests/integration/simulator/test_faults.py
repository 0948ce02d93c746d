"""The simulator fails like SGLang once it is up, when its profile asks (tuner/simulator/faults.py):
wrong text at temperature 0, an out-of-memory crash at a large decode batch, a hang, 500s when too
many requests are in flight."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path

import aiohttp
import pytest

from tests.helpers import faulty_profile
from tests.integration.simulator.conftest import SPEC
from tuner.simulator import faults
from tuner.simulator.process import running_simulator
from tuner.simulator.profile import ProfileError, load_profile
from tuner.simulator.text import TokenWriter
from tuner.targets.base import FailureCause
from tuner.targets.classify import cause_of

TOPK2 = ["--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "6"]
FAULTS = """
[[faults]]
kind = "wrong-output"
when = { speculative_eagle_topk = { min = 2 } }
after_tokens = 3

[[faults]]
kind = "decode-oom"
when = { speculative_num_draft_tokens = 5 }
gb_per_token = 0.5

[[faults]]
kind = "hang"
when = { speculative_num_draft_tokens = 7 }
after_requests = 2

[[faults]]
kind = "server-errors"
when = { speculative_num_draft_tokens = 8 }
above_running = 2
"""


def with_draft(tokens: int) -> list[str]:
    args = list(SPEC)
    args[args.index("--speculative-num-draft-tokens") + 1] = str(tokens)
    args[args.index("--speculative-num-steps") + 1] = str(tokens - 1)
    return args


def generate(url: str, prompt: str, tokens: int = 12,
             timeout: float = 30) -> tuple[int, dict[str, object]]:
    body = json.dumps({"text": prompt,
                       "sampling_params": {"max_new_tokens": tokens, "temperature": 0,
                                            "ignore_eos": True}}).encode()
    request = urllib.request.Request(f"{url}/generate", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


async def burst(url: str, n: int, tokens: int = 64) -> list[int | str]:
    async def one(session: aiohttp.ClientSession, i: int) -> int | str:
        body = {"text": f"prompt {i}",
                "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}}
        try:
            async with session.post(f"{url}/generate", json=body,
                                    timeout=aiohttp.ClientTimeout(total=20)) as r:
                await r.read()
                return r.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            return type(exc).__name__

    async with aiohttp.ClientSession() as session:
        return list(await asyncio.gather(*(one(session, i) for i in range(n))))


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return faulty_profile(Path(tmp_path_factory.mktemp("faults")), FAULTS)


def test_shipped_profiles_have_no_faults_and_bad_ones_are_refused(tmp_path: Path) -> None:
    assert load_profile().faults == ()
    bad = faulty_profile(tmp_path, '[[faults]]\nkind = "melt"\nafter_tokens = 1\n', "bad.toml")
    with pytest.raises(ProfileError, match="kind must be one of"):
        load_profile(str(bad))


def test_wrong_output_diverges_after_the_named_tokens_only_for_matching_flags(
        profile: Path) -> None:
    right = "".join(TokenWriter(0, "What is 2+2?").take(12))
    with running_simulator([*SPEC, *TOPK2], profile=str(profile), time_scale=400,
                           ready_timeout_s=30) as sim:
        status, answer = generate(sim.url, "What is 2+2?")
    assert status == 200
    text = str(answer["text"])
    assert text.split()[:3] == right.split()[:3] and text.split()[3] != right.split()[3]
    with running_simulator(SPEC, profile=str(profile), time_scale=400, ready_timeout_s=30) as sim:
        assert generate(sim.url, "What is 2+2?")[1]["text"] == right


def test_a_large_decode_batch_runs_out_of_memory_and_the_process_exits(profile: Path) -> None:
    config_faults = faults.active(load_profile(str(profile)).faults,
                                  {"speculative_num_draft_tokens": 5})
    assert config_faults.decode_gb_per_token == 0.5
    with running_simulator(with_draft(5), profile=str(profile), time_scale=400,
                           ready_timeout_s=30) as sim:
        assert generate(sim.url, "one at a time")[0] == 200  # a batch of one fits
        results = asyncio.run(burst(sim.url, 16))
        assert sim.process.wait(timeout=20) == 1
        log = sim.log_path.read_text()
    assert any(r != 200 for r in results)
    assert "torch.OutOfMemoryError: CUDA out of memory" in log and faults.SIGQUIT in log
    assert cause_of("crashed-under-load", log) is FailureCause.DECODE_OOM


def test_a_hang_after_n_requests_leaves_requests_and_health_unanswered(profile: Path) -> None:
    with running_simulator(with_draft(7), profile=str(profile), time_scale=400,
                           ready_timeout_s=30) as sim:
        assert [generate(sim.url, f"p{i}")[0] for i in range(2)] == [200, 200]
        with pytest.raises(TimeoutError):
            generate(sim.url, "stuck", timeout=2)
        assert sim.process.poll() is None  # still running


def test_too_many_requests_in_flight_get_500(profile: Path) -> None:
    with running_simulator(with_draft(8), profile=str(profile), time_scale=50,
                           ready_timeout_s=30) as sim:
        results = asyncio.run(burst(sim.url, 8, tokens=128))
    assert results.count(500) >= 4 and 200 in results
