"""A winner whose other weighted phase collapsed carries a caveat (tune, best and summary.md show
it)."""

from __future__ import annotations

from typing import Any

from optuna.trial import TrialState

from tuner.query.caveats import COLLAPSE_DROP, collapse_caveats
from tuner.store.keys import Key
from tuner.store.record import TrialRecord


def record(number: int, c1: float, c64: float, ttft64: float,
           baseline: bool = False) -> TrialRecord:
    phases: dict[str, Any] = {
        "1": {"per_request_tok_s_mean": c1, "per_request_tok_s_mean_ci": [c1 * 0.98, c1 * 1.02],
              "ttft_p50_ms": 9.0},
        "64": {"aggregate_tok_s": c64, "aggregate_tok_s_ci": [c64 * 0.99, c64 * 1.01],
               "ttft_p50_ms": ttft64}}
    return TrialRecord.from_attrs(number, TrialState.COMPLETE,
                                  {Key.PHASES: phases, Key.BASELINE: baseline}, {})


def test_a_collapsed_phase_is_named_with_its_figures_and_the_score_change() -> None:
    baseline = record(0, 100.0, 2000.0, 300.0, baseline=True)
    winner = record(5, 149.0, 1180.0, 537.0)  # C=1 +49 %, C=64 −41 %: the score +4 %
    lines = collapse_caveats(baseline, winner, {1: 0.5, 64: 0.5})
    assert len(lines) == 1
    line = lines[0]
    assert "C=64" in line and "-41%" in line and "score is +4%" in line and "TTFT p50 +79%" in line
    assert "1180.0 [" in line and "2000.0 [" in line and "aggregate tok/s" in line
    assert "(both as measured in the study)" in line


def test_no_caveat_without_a_collapse_or_for_the_baseline_itself() -> None:
    baseline = record(0, 100.0, 2000.0, 300.0, baseline=True)
    mild = record(3, 120.0, 2000.0 * (1 - COLLAPSE_DROP / 2), 320.0)
    assert collapse_caveats(baseline, mild, {1: 0.5, 64: 0.5}) == []
    assert collapse_caveats(baseline, baseline, {1: 0.5, 64: 0.5}) == []
    assert collapse_caveats(None, mild, {1: 0.5, 64: 0.5}) == []
    # one weighted phase
    assert collapse_caveats(baseline, record(4, 150.0, 1000.0, 600.0), {1: 1.0}) == []
