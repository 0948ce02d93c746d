"""The duration estimate of ``validate --plan``: phases from request counts and max_tokens, measured
trials when there are some, several hosts side by side, and the study's timeout."""

from __future__ import annotations

import dataclasses

from optuna.trial import TrialState

from objectives.spec import PhaseSpec
from tests.helpers import STUDIES
from tuner.app.plan import ASSUMED_AGGREGATE_TOK_S, StudyPlan, _measured_trial_s, _phase
from tuner.store.record import Outcome, TrialRecord
from tuner.study.load import load_study_file
from tuner.targets.base import DeployPlan

SPEC = load_study_file(STUDIES / "simulated.toml")  # max_tokens = 256


def test_a_phase_takes_its_requests_times_max_tokens_at_the_assumed_rate_capped_by_its_deadline() -> None:  # noqa: E501 - the test's name says what it checks
    c64 = _phase(PhaseSpec(concurrency=64, requests=128, warmup=8), SPEC, 1.0)
    assert c64.seconds == 136 * 256 / ASSUMED_AGGREGATE_TOK_S
    assert _phase(PhaseSpec(concurrency=64, requests=128, warmup=8), SPEC,
                  10.0).seconds == c64.seconds / 10
    capped = _phase(PhaseSpec(concurrency=1, requests=10_000, deadline_s=600), SPEC, 1.0)
    assert (capped.seconds, capped.basis) == (600, "its deadline")
    timed = _phase(PhaseSpec(concurrency=64, duration_s=120, warmup=0), SPEC, 1.0)
    assert timed.seconds == 120
    assert "assumed: the seed campaign's" in c64.basis  # another model's rates are labelled as such
    modelled = _phase(PhaseSpec(concurrency=64, requests=128, warmup=8), SPEC, 1.0, 2000.0)
    assert modelled.seconds == 136 * 256 / 2000.0 and "assumed" not in modelled.basis


def _plan(**changes: object) -> StudyPlan:
    deploy = DeployPlan("command line", "x", (), (), "")
    base = StudyPlan(deploy, startup_s=60, startup_basis="", phases=(), n_trials=40, confirm_runs=8,
                     timeout_s=3600)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_the_timeout_bounds_the_trials_and_hosts_run_side_by_side() -> None:
    one = _plan()
    assert one.trials_s == 40 * 60 and one.fitting_trials() == 40  # room for 60
    short = _plan(timeout_s=1800)
    assert short.fitting_trials() == 30
    two = _plan(timeout_s=1800, hosts=2)
    assert two.trials_s == 20 * 60 and two.fitting_trials() == 40
    assert _plan(timeout_s=None).fitting_trials() is None


def test_measured_trials_replace_the_estimate() -> None:
    def record(n: int, total: float) -> TrialRecord:
        return TrialRecord(number=n, state=TrialState.COMPLETE, outcome=Outcome.MEASURED,
                           counts=True, score=1.0,
                           timings={"deploy_s": 1.0, "ready_s": total - 11.0, "benchmark_s": 10.0})
    assert _measured_trial_s([record(0, 30), record(1, 50), record(2, 40)]) == 40
    assert _measured_trial_s([]) is None
    assert _plan(measured_trial_s=40.0).trial_s == 40
