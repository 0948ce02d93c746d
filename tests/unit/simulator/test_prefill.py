"""Prefill batches as SGLang forms them: the token budgets, chunking, and a long wave's first tokens
in steps (tuner/simulator/prefill.py)."""

from __future__ import annotations

import asyncio
import math
from collections import Counter, deque

import pytest

from tests.unit.simulator.test_engine import configure, run_all, virtual
from tuner.simulator import model, text
from tuner.simulator.engine import GenerationRequest
from tuner.simulator.prefill import PrefillLimits, form_batch
from tuner.simulator.profile import Profile, load_profile
from tuner.simulator.requests import RequestHandle
from tuner.simulator.running import Running


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_profile()


def _request(tokens: int) -> Running:
    request = GenerationRequest(prompt="x", max_new_tokens=8, prompt_tokens=tokens)
    handle = RequestHandle(rid="r", prompt_tokens=tokens, output_length=8)
    return Running(request=request, handle=handle, survival=(), u=0.0,
                   writer=text.TokenWriter(0, "x", None), reserved=tokens + 8,
                   prefill_left=tokens)


def _form(limits: PrefillLimits, waiting: deque[Running], chunked: Running | None = None,
          fits: int = 10**6) -> tuple[list[int], list[Running]]:
    admitted: list[Running] = []
    batch = form_batch(limits, chunked, waiting, lambda _r: len(admitted) < fits,
                       admitted.append)
    return [batch.tokens, len(batch.done), batch.chunked is not None], admitted


def test_a_prompt_past_the_chunk_budget_is_cut_to_fill_it_and_continued_first() -> None:
    limits = PrefillLimits(max_prefill_tokens=16384, chunk=8192)
    waiting = deque(_request(3000) for _ in range(4))
    figures, admitted = _form(limits, waiting)
    # 3000 + 3000 + 2192 of the third: two done, the third chunked, the fourth left waiting
    assert figures == [8192, 2, True] and len(admitted) == 3 and len(waiting) == 1
    assert admitted[2].prefill_left == 808
    # the next batch finishes the chunked one before it takes the fourth
    figures, admitted_next = _form(limits, waiting, chunked=admitted[2])
    assert figures == [3808, 2, False] and admitted[2].prefill_left == 0
    assert len(admitted_next) == 1 and not waiting


def test_a_budget_that_runs_out_leaves_the_rest_waiting_for_the_next_batch() -> None:
    # (that the next batch comes before any decode is the engine's: the wave test below)
    limits = PrefillLimits(max_prefill_tokens=16384, chunk=8192)
    waiting = deque(_request(4096) for _ in range(3))
    figures, _ = _form(limits, waiting)
    assert figures == [8192, 2, False] and len(waiting) == 1
    # a full pool or the running-request cap stops the batch too
    waiting = deque(_request(100) for _ in range(3))
    figures, _ = _form(limits, waiting, fits=1)
    assert figures == [100, 1, False] and len(waiting) == 2


def test_without_chunked_prefill_the_input_budget_holds_back_all_but_a_batchs_first() -> None:
    limits = PrefillLimits(max_prefill_tokens=1000, chunk=None)
    waiting = deque([_request(5000), _request(10)])
    figures, _ = _form(limits, waiting)
    assert figures == [5000, 1, False] and len(waiting) == 1  # the first runs whole, above it
    waiting = deque([_request(600), _request(400), _request(10)])
    figures, _ = _form(limits, waiting)
    assert figures == [600, 1, False] and len(waiting) == 2


def test_cancelled_requests_are_dropped_from_the_queue_and_a_cancelled_chunk_is_not_continued(
) -> None:
    limits = PrefillLimits(max_prefill_tokens=16384, chunk=8192)
    gone, kept = _request(50), _request(70)
    gone.cancelled = True
    waiting = deque([gone, kept])
    figures, admitted = _form(limits, waiting)
    assert figures == [70, 1, False] and admitted == [kept]
    chunk = _request(9000)
    chunk.prefill_left, chunk.cancelled = 500, True
    figures, _ = _form(limits, deque(), chunked=chunk)
    assert figures == [0, 0, False] and chunk.prefill_left == 500


def _first_tokens_ms(profile: Profile, prompt_tokens: int, n: int = 64) -> list[float]:
    config = configure(profile, "--max-running-requests", str(n))
    requests = [GenerationRequest(prompt=f"prompt {k}", max_new_tokens=16, ignore_eos=True,
                                  prompt_tokens=prompt_tokens) for k in range(n)]
    chunks = asyncio.run(run_all(virtual(profile, config, seed=0), requests))
    return [round(c[0].at_s * 1000.0, 3) for c in chunks]


@pytest.mark.parametrize("tokens", [1259, 4096])  # a prompt cut at each chunk's end; none cut
def test_a_wave_of_long_prompts_gets_its_first_tokens_in_chunk_sized_steps(
        profile: Profile, tokens: int) -> None:
    config = configure(profile)
    chunk = config.chunked_prefill_size
    ttft = _first_tokens_ms(profile, tokens)
    steps = sorted(Counter(ttft).items())
    # one step per chunk of the wave's 64 × 1259 tokens, in arrival order
    assert len(steps) == math.ceil(64 * tokens / chunk)
    assert ttft == sorted(ttft)
    # each step is one prefill batch of at most a chunk: the first ends after one chunk's prefill
    assert steps[0][0] == round(model.prefill_ms(profile, chunk), 3)
    assert all(count <= math.ceil(chunk / tokens) + 1 for _, count in steps)
    # the whole wave costs what one batch would, plus a batch's fixed cost per extra batch
    whole = model.prefill_ms(profile, 64 * tokens)
    assert math.isclose(steps[-1][0], whole + (len(steps) - 1) * profile.timing.prefill_base_ms,
                        abs_tol=1e-3)


def test_a_wave_of_short_prompts_is_still_prefilled_in_one_batch(profile: Profile) -> None:
    ttft = _first_tokens_ms(profile, 30)
    assert len(set(ttft)) == 1
    assert ttft[0] == round(model.prefill_ms(profile, 64 * 30), 3)


def test_a_request_that_arrives_during_a_prefill_is_prefilled_before_the_next_decode(
        profile: Profile) -> None:
    # SGLang forms a prefill batch whenever a waiting request can be admitted, and decodes only
    # when none can: a request that arrives while another is prefilled gets its first token before
    # the first one's second.
    config = configure(profile)
    first = GenerationRequest(prompt="first", max_new_tokens=8, ignore_eos=True, prompt_tokens=500)
    late = GenerationRequest(prompt="late", max_new_tokens=8, ignore_eos=True, prompt_tokens=300)

    async def scenario() -> tuple[list[float], list[float]]:
        engine = virtual(profile, config, seed=0)
        engine.start()
        try:
            a = engine.submit(first)
            while engine.num_running == 0:  # the first one's prefill is under way
                await asyncio.sleep(0)
            b = engine.submit(late)
            chunks_a = [c async for c in a.chunks()]
            chunks_b = [c async for c in b.chunks()]
            return [c.at_s for c in chunks_a], [c.at_s for c in chunks_b]
        finally:
            await engine.stop()

    a, b = asyncio.run(scenario())
    assert b[0] == pytest.approx(a[0] + model.prefill_ms(profile, 300) / 1000.0)
    assert b[0] < a[1]
