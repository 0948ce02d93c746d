"""The report's failure plot: a failed trial and a good one at the same point both show, and a
trial still waiting in the queue is neither."""

from __future__ import annotations

from optuna.trial import TrialState

from tuner.query.ranking import Ranking, TrialView
from tuner.report.figures import failures
from tuner.sglang.launch import ServerConfig
from tuner.store.record import Outcome, TrialRecord

MEM, GRAPHS = "--mem-fraction-static", "--cuda-graph-max-bs-decode"


def _view(number: int, state: TrialState, outcome: Outcome | None, mem: float) -> TrialView:
    flags = {"--model-path": "m", MEM: mem, GRAPHS: 64}
    record = TrialRecord(number=number, state=state, outcome=outcome, counts=True, score=None,
                         config=ServerConfig.build(flags) if outcome else None,
                         params_decoded=flags)
    return TrialView(record=record, tuned={MEM: mem, GRAPHS: 64}, score=None, violations={})


def test_an_interrupted_trial_and_its_rerun_at_one_point_both_show_and_waiting_ones_do_not(
        ) -> None:
    trials = (_view(0, TrialState.FAIL, None, 0.86),  # interrupted
              _view(1, TrialState.COMPLETE, Outcome.MEASURED, 0.86),  # its re-run
              _view(2, TrialState.COMPLETE, Outcome.MEASURED, 0.90),
              _view(3, TrialState.WAITING, None, 0.88))  # queued: neither failed nor not
    figure = failures(Ranking({1: 1.0}, {1: 100.0}, (), trials), [MEM, GRAPHS])
    assert figure is not None
    assert figure.layout.title.text.endswith("of 3 trials")
    by_name = {trace.name: trace for trace in figure.data}
    ok, interrupted = by_name["no failure"], by_name["interrupted (1)"]
    assert len(ok.x) == 2 and 0.88 not in ok.x  # the waiting trial is not a "no failure"
    at_086 = [x for x in ok.x if abs(x - 0.86) < 0.01]
    assert len(at_086) == 1 and at_086[0] != interrupted.x[0]  # side by side, not on top
