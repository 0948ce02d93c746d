"""Exit 7's one line says why nothing was measured — and only when nothing was."""

from __future__ import annotations

from tuner.app.tune import TuneOutcome
from tuner.run.loop import StopReason


def _outcome(measured: int, benchmarked: int | None, stopped: StopReason) -> TuneOutcome:
    return TuneOutcome("s", measured, stopped, None, None, benchmarked=benchmarked)


def test_why_nothing_was_measured_follows_how_the_study_stopped() -> None:
    assert _outcome(3, 1, StopReason.N_TRIALS).why_nothing_measured() is None
    assert _outcome(3, None, StopReason.N_TRIALS).why_nothing_measured() is None
    assert "the baseline failed to start" in str(
        _outcome(1, 0, StopReason.BASELINE_FAILED).why_nothing_measured())
    assert "the setup (model, GPUs, the server command)" in str(
        _outcome(4, 0, StopReason.STARTS_FAILED).why_nothing_measured())
    assert _outcome(5, 0, StopReason.N_TRIALS).why_nothing_measured() == (
        "every start or run failed")
    # every proposal refused before it was deployed: nothing used the server
    assert _outcome(0, 0, StopReason.EXHAUSTED).why_nothing_measured() == (
        "no configuration was deployed (stopped: exhausted)")
