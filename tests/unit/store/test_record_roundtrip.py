"""The typed record the trial runner builds is what every reader gets back:
``from_attrs(to_attrs(r)) == r``."""

from __future__ import annotations

import dataclasses

import pytest
from optuna.trial import TrialState

from objectives.confidence import Interval
from tuner.sglang.launch import ServerConfig
from tuner.store.keys import Key
from tuner.store.record import Outcome, RejectedBy, TrialRecord
from tuner.targets.base import FailureCause

CONFIG = ServerConfig.build({"--model-path": "m", "--speculative-num-steps": 3})
BASE = TrialRecord(number=4, state=TrialState.COMPLETE, outcome=None, counts=False, score=None,
                   params_decoded={"--speculative-num-steps": 3},
                   repairs=("raised draft tokens to 4",),
                   config=CONFIG, config_key="k", effective={"page_size": 1}, host="gpu-a",
                   baseline=True)

CASES = {
    "rejected": dict(outcome=Outcome.REJECTED, reason="topk > 1 needs steps > 1",
                     rejected_by=RejectedBy.SGLANG),
    "deploy-failed": dict(outcome=Outcome.DEPLOY_FAILED, counts=True, failure_class="out-of-memory",
                          failure="out-of-memory: no room",
                          failure_cause=FailureCause.GRAPH_CAPTURE_OOM,
                          log_tail="CUDA out of memory", log="/tmp/server.log",
                          timings={"deploy_s": 3.0}),
    "measured": dict(outcome=Outcome.MEASURED, counts=True, score=1.05, score_ci=Interval(1.0, 1.1),
                     metrics={1: {"per_request_tok_s_mean": 100.0},
                              64: {"aggregate_tok_s": 2000.0}},
                     launch="python -m sglang.launch_server", base_url="http://127.0.0.1:30000",
                     timings={"deploy_s": 1.0, "ready_s": 2.0, "benchmark_s": 9.0},
                     output_check={"result": "same"}),
    "skipped": dict(outcome=Outcome.MEASURED, counts=True, score=0.8, skipped_phases=(64,),
                    skip={"bounds": {"64": 2300.0}, "optimistic_score": 0.8},
                    metrics={1: {"x": 1.0}}),
    "run-failed": dict(outcome=Outcome.RUN_FAILED, counts=True, failure_class="crashed-under-load",
                       failure="CUDA out of memory", failure_cause=FailureCause.DECODE_OOM,
                       run_failure={"phase": "c64", "concurrency": 64},
                       metrics={64: {"failure": "crashed-under-load"}}),
    "duplicate": dict(outcome=Outcome.DUPLICATE, duplicate_of=2, metrics={1: {"x": 1.0}},
                      skipped_phases=(64,)),
    "taken": dict(outcome=Outcome.TAKEN, taken_by=3, state=TrialState.FAIL),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_drafted_record_reads_back_unchanged(name: str) -> None:
    draft = dataclasses.replace(BASE, **CASES[name])  # type: ignore[arg-type]
    back = TrialRecord.from_attrs(draft.number, draft.state, draft.to_attrs(), {})
    assert back == draft


def test_the_stored_form_is_the_one_earlier_versions_wrote() -> None:
    draft = dataclasses.replace(BASE, **CASES["measured"])  # type: ignore[arg-type]
    attrs = draft.to_attrs()
    # not the enum object
    assert attrs[Key.OUTCOME] == "measured" and type(attrs[Key.OUTCOME]) is str
    assert attrs[Key.PHASES] == {"1": {"per_request_tok_s_mean": 100.0},
                                 "64": {"aggregate_tok_s": 2000.0}}
    assert attrs[Key.SCORE_CI] == [1.0, 1.1] and attrs[Key.SKIPPED_PHASES] == [] \
           and attrs[Key.COUNTS] is True
    assert attrs[Key.CONFIG] == CONFIG.to_json()
    # a field at its default is not written: a running trial shows no outcome, no failure, no score
    running = TrialRecord(number=1, state=TrialState.RUNNING, outcome=None, counts=False,
                          score=None, host="h")
    assert running.to_attrs() == {Key.HOST: "h"}
