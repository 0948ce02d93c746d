"""The trials table: sorting, bad keys, JSON rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.core.errors import UsageError
from tuner.query.answers import ranking_for
from tuner.query.load import open_stored_study
from tuner.query.table import rows, sort_rows


def _table(path: Path) -> tuple[list, list[str], tuple[int, ...]]:
    stored = open_stored_study(path)
    ranking = ranking_for(stored)
    flags = [p.flag for p in stored.spec.search]
    return rows(ranking, flags), flags, ranking.concurrencies


def test_sort_by_metric_is_best_first_with_missing_values_last(stored_study: Path) -> None:
    table, flags, phases = _table(stored_study)
    by_c64 = sort_rows(table, "c64", flags, phases)
    values = [dict(r.speeds)[64] for r in by_c64]
    present = [v for v in values if v is not None]
    assert present == sorted(present, reverse=True)
    assert values[len(present):] == [None] * (len(values) - len(present)) \
           and len(present) < len(values)
    by_score = sort_rows(table, "score", flags, phases)
    scores = [r.score for r in by_score if r.score is not None]
    assert scores == sorted(scores, reverse=True)


def test_sort_by_a_tuned_flag_uses_its_short_name(stored_study: Path) -> None:
    table, flags, phases = _table(stored_study)
    steps = [dict(r.flags)["--speculative-num-steps"]
             for r in sort_rows(table, "num-steps", flags, phases)]
    assert steps == sorted(steps)


def test_unknown_sort_key_lists_the_valid_ones(stored_study: Path) -> None:
    table, flags, phases = _table(stored_study)
    with pytest.raises(UsageError,
                       match=r"--sort: unknown key 'speed'; use one of: number, score, c1, c64"):
        sort_rows(table, "speed", flags, phases)


def test_json_rows_carry_flags_speeds_and_failure(stored_study: Path) -> None:
    table, _, _ = _table(stored_study)
    oom = next(r.to_json() for r in table if r.failure == "out-of-memory")
    assert oom["c1_tok_s"] is None and oom["score"] is None and oom["feasible"] is False
    ok = next(r.to_json() for r in table if r.status == "ok")
    assert ok["c1_tok_s"] > 0 and ok["c64_tok_s"] > 0 and ok["accept_length"] > 1
    assert set(ok["flags"]) >= {"--speculative-num-steps", "--mem-fraction-static"}


def test_the_comparison_shows_each_phase_metrics_stored_interval() -> None:
    from tuner.query.comparison import half_width

    metrics = {"per_request_tok_s_mean": 120.0, "per_request_tok_s_mean_ci": [110.0, 130.0],
               "aggregate_tok_s": 900.0, "ci_half_width": 0.05}
    assert half_width(metrics, "per_request_tok_s_mean") == 10.0
    # A study stored before per-figure intervals: the throughput's relative half-width.
    assert half_width(metrics, "aggregate_tok_s") == 45.0
    assert half_width(metrics, "ttft_p50_ms") is None
