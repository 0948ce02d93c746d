from __future__ import annotations

from optuna.trial import TrialState

from objectives.latency_intervals import LATENCY_INTERVALS, latency_intervals
from tests.helpers import requests_of
from tuner.query.comparison import LATENCIES, comparison_rows
from tuner.store.record import Outcome, TrialRecord


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
