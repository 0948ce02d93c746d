"""The greedy probe against the simulator, through each API: the same text streamed as the engine
writes it."""

from __future__ import annotations

import dataclasses

import pytest

from objectives.probe import _read, probe_outputs
from objectives.spec import WorkloadSpec
from tuner.simulator.process import RunningSimulator


@pytest.mark.parametrize("api", ["chat", "completions", "generate"])
def test_every_api_gives_whole_deterministic_texts(sim: RunningSimulator, api: str) -> None:
    workload = dataclasses.replace(WorkloadSpec(), api=api, model="sim-model", temperature=0.7)
    batched = probe_outputs(sim.url, workload, 3, 12)
    one_by_one = probe_outputs(sim.url, workload, 3, 12, concurrent=False)
    assert [o.text for o in batched] == [o.text for o in one_by_one]
    assert all(o.text and len(o.text.split()) == 12 and o.error is None for o in batched)
    assert len({o.prompt for o in batched}) == 3


def test_a_whole_json_answer_and_an_error_event_are_read() -> None:
    assert _read("completions", b'{"choices": [{"text": " a b", "finish_reason": "length"}]}') == (
        " a b", "length")
    assert _read("chat", b'data: {"error": {"message": "boom"}}\n\ndata: [DONE]\n\n') \
           == (None, None)
