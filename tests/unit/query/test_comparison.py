from __future__ import annotations

from optuna.trial import TrialState

from objectives.confidence import Interval
from objectives.latency_intervals import LATENCY_INTERVALS, latency_intervals
from tests.helpers import requests_of
from tuner.query.comparison import LATENCIES, comparison_rows
from tuner.query.ranking import Ranking, TrialView
from tuner.query.speculation import comparison_lines
from tuner.sglang.launch import FlagValue, ServerConfig
from tuner.store.record import Outcome, TrialRecord, skipped_text


def test_every_latency_in_the_comparison_table_shows_its_interval() -> None:
    assert {metric for metric, _ in LATENCIES} <= set(LATENCY_INTERVALS)
    records = requests_of(64)
    phase = {"per_request_tok_s_mean": 100.0, "ttft_p50_ms": 50.0, "ttft_p99_ms": 90.0,
             "itl_mean_ms": 8.0,
             **{f"{n}_ci": list(v) for n, v in latency_intervals(records).items()}}
    record = TrialRecord(number=1, state=TrialState.COMPLETE, outcome=Outcome.MEASURED,
                         counts=True, score=1.0, metrics={1: phase})
    rows = comparison_rows(record, record)
    latency_rows = [r for r in rows if r[0].endswith(" ms")]
    assert len(latency_rows) == 3 and all("±" in r[2] for r in latency_rows)


def _view(number: int, flags: dict[str, FlagValue], score: float | None,
          skipped: tuple[int, ...] = ()) -> TrialView:
    record = TrialRecord(number=number, state=TrialState.COMPLETE, outcome=Outcome.MEASURED,
                         counts=True, score=score, config=ServerConfig.build(flags),
                         metrics={1: {"per_request_tok_s_mean": 100.0}}, skipped_phases=skipped)
    return TrialView(record=record, tuned={}, score=score, violations={},
                     interval=Interval(score * 0.98, score * 1.02) if score else None)


def test_a_reference_that_cannot_be_compared_is_named_with_the_reason() -> None:
    """SGLang's adaptive steps compared; speculation off measured but its C=64 phase skipped, so
    it has no score under these weights: ``best`` says so instead of leaving it out."""
    eagle = {"--model-path": "m", "--speculative-algorithm": "EAGLE3"}
    trials = (_view(0, {**eagle, "--speculative-num-steps": 3}, 1.0),
              _view(1, {**eagle, "--speculative-adaptive": True}, 0.9),
              _view(2, {"--model-path": "m"}, None, skipped=(64,)))
    lines = comparison_lines(Ranking({1: 0.5, 64: 0.5}, {1: 100.0, 64: 1000.0}, (), trials))
    assert lines[0].startswith("tuned static winner: trial 0")
    adaptive = "vs SGLang's adaptive steps (--speculative-adaptive) (trial 1"
    assert any(line.startswith(adaptive) for line in lines)
    assert lines[-1] == ("vs speculation off: not comparable here — trial 2: "
                         f"{skipped_text((64,))}")


def test_no_reference_deployed_no_line() -> None:
    eagle = {"--model-path": "m", "--speculative-algorithm": "EAGLE3"}
    trials = (_view(0, {**eagle, "--speculative-num-steps": 3}, 1.0),)
    assert comparison_lines(Ranking({1: 1.0}, {1: 100.0}, (), trials)) == []
