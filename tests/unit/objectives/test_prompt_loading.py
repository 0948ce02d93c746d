from __future__ import annotations

import json
from pathlib import Path

import pytest

from objectives.api import APIS
from objectives.prompts import (
    BUILTIN_PROMPTS,
    FixedPrompts,
    Prompt,
    SyntheticPrompts,
    WorkloadError,
    load_source,
    parse_item,
    parse_jsonl,
)
from objectives.spec import WorkloadSpec


def test_the_builtin_set_is_varied_and_loads() -> None:
    lines = [json.loads(line) for line in BUILTIN_PROMPTS.read_text().splitlines() if line.strip()]
    assert 40 <= len(lines) <= 60
    categories = {line["category"] for line in lines}
    assert {"coding", "agentic", "summarization", "qa", "math"} <= categories
    source = load_source(WorkloadSpec(dataset="builtin"))
    assert isinstance(source, FixedPrompts) and len(source) == len(lines)


def test_the_three_item_shapes() -> None:
    assert parse_item({"prompt": "hi"}) == Prompt((("user", "hi"),))
    messages = parse_item(
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q"},
                      {"role": "assistant", "content": "a"}]})
    # the recorded answer is not sent
    assert messages.messages == (("system", "be brief"), ("user", "q"))
    sharegpt = parse_item(
        {"conversations": [{"from": "human", "value": "first"}, {"from": "gpt", "value": "x"},
                           {"from": "human", "value": "second"}]})
    assert sharegpt.messages == (("user", "first"),)


def test_file_problems_are_reported_with_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(
        '{"prompt": "ok"}\n\nnot json\n{"conversations": [{"from": "gpt", "value": "x"}]}\n')
    with pytest.raises(WorkloadError) as info:
        load_source(WorkloadSpec(dataset=str(path)))
    assert f"{path}:3: not JSON" in str(info.value)
    assert f"{path}:4:" in str(info.value)
    assert info.value.exit_code == 2
    with pytest.raises(WorkloadError, match="cannot read"):
        load_source(WorkloadSpec(dataset=str(tmp_path / "missing.jsonl")))
    with pytest.raises(WorkloadError, match="no prompts"):
        parse_jsonl("\n\n", "empty")


def test_order_is_shuffled_by_seed_and_repeats() -> None:
    prompts = [Prompt((("user", str(i)),)) for i in range(5)]
    a, b = FixedPrompts(prompts, seed=1), FixedPrompts(prompts, seed=2)
    first = [a.prompt(i) for i in range(5)]
    assert sorted(p.text for p in first) == ["0", "1", "2", "3", "4"]
    assert [a.prompt(i + 5) for i in range(5)] == first
    assert [b.prompt(i) for i in range(5)] != first


def test_synthetic_prompts_have_about_n_words_and_differ_per_request() -> None:
    source = SyntheticPrompts(input_tokens=300, seed=0)
    text = source.prompt(3).text
    assert 280 <= len(text.split()) <= 310
    assert source.prompt(3) == SyntheticPrompts(300, 0).prompt(3)
    assert source.prompt(4) != source.prompt(3)


def test_conversation_text_for_text_apis() -> None:
    prompt = Prompt((("system", "be brief"), ("user", "why?")))
    assert prompt.text == "System: be brief\n\nUser: why?\n\nAssistant:"


def test_request_bodies_ask_for_per_chunk_usage_and_the_workload_settings() -> None:
    prompt = Prompt((("user", "hello"),))
    workload = WorkloadSpec(max_tokens=64, temperature=0.7)
    chat = json.loads(APIS["chat"].body(prompt, workload, "m"))
    assert chat["messages"] == [{"role": "user", "content": "hello"}]
    assert chat["stream"] \
           and chat["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert chat["max_tokens"] == 64 and chat["temperature"] == 0.7 and chat["model"] == "m"
    assert "ignore_eos" not in chat
    completions = json.loads(APIS["completions"].body(prompt, WorkloadSpec(ignore_eos=True), None))
    assert completions["prompt"] == "hello" and completions["ignore_eos"] is True \
           and "model" not in completions
    native = json.loads(APIS["generate"].body(prompt, WorkloadSpec(max_tokens=9, temperature=0.0),
                                              None))
    assert native["sampling_params"] == {"max_new_tokens": 9, "temperature": 0.0,
                                         "ignore_eos": False}


def test_extractors_read_sglang_events() -> None:
    chat = {"choices": [{"delta": {"content": "abc", "reasoning_content": "zz"},
                         "finish_reason": None}],
            "usage": {"completion_tokens": 4, "prompt_tokens": 9}}
    assert APIS["chat"].extract(chat) == (4, 5, None, 9)
    usage_only = {"choices": [], "usage": {"completion_tokens": 7, "prompt_tokens": 9}}
    assert APIS["chat"].extract(usage_only) == (7, 0, None, 9)
    assert APIS["completions"].extract({"choices": [{"text": "ab", "finish_reason": "stop"}],
                                        "usage": None}) == (
        None, 2, "stop", None)
    native = {"text": "a b c", "meta_info": {"completion_tokens": 3, "prompt_tokens": 5,
                                             "finish_reason": {"type": "length"}}}
    assert APIS["generate"].extract(native) == (3, 0, "length", 5)
