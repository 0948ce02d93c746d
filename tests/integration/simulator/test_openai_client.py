"""The official ``openai`` client against the simulator process: streaming and whole responses."""

from __future__ import annotations

import pytest
from openai import OpenAI

from tuner.simulator.process import RunningSimulator


@pytest.fixture
def client(sim: RunningSimulator) -> OpenAI:
    return OpenAI(base_url=f"{sim.url}/v1", api_key="x", timeout=10.0, max_retries=0)


def test_models_list_names_the_served_model(client: OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == ["sim-model"]


def test_chat_completion_stream_with_usage(client: OpenAI) -> None:
    stream = client.chat.completions.create(
        model="sim-model",
        messages=[{"role": "user", "content": "Tell me about speculative decoding."}],
        max_tokens=40, temperature=0.0, stream=True, stream_options={"include_usage": True},
        extra_body={"ignore_eos": True})
    chunks = list(stream)
    content = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    roles = [c.choices[0].delta.role for c in chunks if c.choices]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert roles[0] == "assistant" and content[0] == ""
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 40 == len("".join(content).split())
    # Speculation: some chunks carry several tokens (one chunk per decode iteration).
    assert len(content) - 1 < 40
    assert {c.model for c in chunks} == {"sim-model"} and len({c.id for c in chunks}) == 1


def test_completion_stream_and_continuous_usage(client: OpenAI) -> None:
    stream = client.completions.create(
        model="sim-model", prompt="The quick brown fox", max_tokens=25, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
        extra_body={"ignore_eos": True})
    chunks = list(stream)
    text_chunks = [c for c in chunks if c.choices]
    counts = [c.usage.completion_tokens for c in text_chunks if c.usage is not None]
    assert len(counts) == len(text_chunks)  # usage on every chunk
    assert counts == sorted(counts) and counts[-1] == 25
    assert all(c.object == "text_completion" for c in chunks)
    assert text_chunks[-1].choices[0].finish_reason == "length"


def test_whole_responses(client: OpenAI) -> None:
    chat = client.chat.completions.create(model="sim-model",
                                          messages=[{"role": "user", "content": "hi"}],
                                          max_tokens=12, extra_body={"ignore_eos": True})
    assert chat.choices[0].message.role == "assistant"
    assert len((chat.choices[0].message.content
                or "").split()) == chat.usage.completion_tokens == 12  # type: ignore[union-attr]
    completion = client.completions.create(model="sim-model", prompt="Once upon a time",
                                           max_tokens=7, extra_body={"ignore_eos": True})
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None and completion.usage.completion_tokens == 7
