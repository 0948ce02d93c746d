"""GPU-hours accounting of trials (tuner/evaluation/cost.py), on hand-computed cases, and the
modelled start-up timings that reach it through the landscape API (a failed start costs its time
until it failed)."""

from __future__ import annotations

from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from bench.gpu_hours import seed_cost, spend
from objectives.spec import BenchmarkSpec, PhaseSpec, WorkloadSpec
from tests.helpers import STUDIES
from tuner.evaluation.cost import CostModel, benchmark_s, gpus_of
from tuner.evaluation.landscape import DeployFailed, OracleMeasurer, ServerConfig, evaluate_search
from tuner.sglang.options import load_option_table
from tuner.simulator.profile import load_profile
from tuner.simulator.startup import startup_s
from tuner.store.record import Outcome, TrialRecord, measured_records
from tuner.study.load import load_study_file

#: C=1: 8 requests + 1 warm-up; C=64: 256 + 8; 500 tokens each.
BENCH = BenchmarkSpec(WorkloadSpec(max_tokens=500), (PhaseSpec(1, requests=8, warmup=1),
                                                     PhaseSpec(64, requests=256, warmup=8)))
METRICS = {1: {"per_request_tok_s_mean": 100.0, "aggregate_tok_s": 100.0},
           64: {"per_request_tok_s_mean": 15.0, "aggregate_tok_s": 1000.0}}
TP4 = ServerConfig.build({"--tp-size": 4, "--speculative-num-steps": 3})


def record(number: int = 0, outcome: Outcome = Outcome.MEASURED, *, metrics: Any = None,
           timings: Any = None, skipped: tuple[int, ...] = (),
           config: ServerConfig = TP4) -> TrialRecord:
    return TrialRecord(number=number, state=TrialState.COMPLETE, outcome=outcome, counts=True,
                       score=1.0, config=config, metrics=METRICS if metrics is None else metrics,
                       skipped_phases=skipped,
                       timings={"deploy_s": 10.0, "ready_s": 90.0} if timings is None else timings)


def test_a_measured_trial_costs_its_start_up_and_its_phases_at_the_measured_speeds_times_its_gpus() -> None:  # noqa: E501 - the test's name says what it checks
    cost = CostModel(BENCH).trial(record())
    # C=1 one request after another: 9 × 500 / 100 = 45 s; C=64 at the aggregate: 264 × 500 / 1000 =
    # 132 s.
    assert cost.startup_s == 100.0 and cost.benchmark_s == pytest.approx(177.0) and cost.gpus == 4
    assert cost.gpu_hours == pytest.approx(277.0 * 4 / 3600)


def test_a_skipped_phase_and_a_failed_start_cost_only_what_ran() -> None:
    model = CostModel(BENCH)
    assert model.trial(record(skipped=(64,), metrics={1: METRICS[1]})).benchmark_s == pytest.approx(
        45.0)
    failed = model.trial(record(outcome=Outcome.DEPLOY_FAILED, metrics={},
                                timings={"deploy_s": 0.001,
                                        "ready_s": 30.0}))
    assert failed.benchmark_s == 0.0 and failed.seconds == pytest.approx(30.001)


def test_no_stored_readiness_takes_the_default_and_a_fixed_wait_replaces_any_start_up() -> None:
    asked: list[tuple[ServerConfig, bool]] = []

    def default(config: ServerConfig, failed: bool) -> float:
        asked.append((config, failed))
        return 50.0

    zeros = record(timings={"deploy_s": 0.0, "ready_s": 0.0})
    assert CostModel(BENCH, default_startup=default).trial(zeros).startup_s == 50.0 \
           and asked == [(TP4, False)]
    # stored wins
    assert CostModel(BENCH, default_startup=default).trial(record()).startup_s == 100.0
    assert CostModel(BENCH,
                     wait_s=100.0).trial(record(timings={"ready_s": 400.0})).startup_s == 100.0


def test_another_benchmarks_unmeasured_levels_follow_a_saturating_curve() -> None:
    seed_like = BenchmarkSpec(WorkloadSpec(max_tokens=500), (PhaseSpec(4, requests=8, warmup=0),
                                                             PhaseSpec(16, requests=16, warmup=0)))
    # C=4: min(4 × 100, 1000) = 400 tok/s → 8 × 500 / 400 = 10 s; C=16: min(1600, 1000) → 16 × 500 /
    # 1000 = 8 s.
    assert benchmark_s(seed_like, METRICS) == pytest.approx(18.0)
    capped = BenchmarkSpec(WorkloadSpec(max_tokens=500),
                           (PhaseSpec(1, requests=100, duration_s=20.0),))
    assert benchmark_s(capped, METRICS) == pytest.approx(20.0)  # a phase's duration ends it first


def test_gpus_are_tensor_times_pipeline_times_data_parallel() -> None:
    assert gpus_of(ServerConfig.build({})) == 1
    assert gpus_of(ServerConfig.build({"--tp-size": 2, "--dp-size": 2, "--pp-size": 2})) == 8
    assert gpus_of(ServerConfig.build({"--tp-size": 4, "--dp-size": 4,
                                       "--enable-dp-attention": True})) == 4


def test_cumulative_gpu_hours_add_up_in_the_order_measured() -> None:
    one = 277.0 * 4 / 3600
    hours = CostModel(BENCH).cumulative_gpu_hours([record(0), record(1), record(2)])
    assert hours == pytest.approx([one, 2 * one, 3 * one])


def test_the_simulator_landscape_reports_its_start_up_model_and_a_failed_start_its_time_to_fail() -> None:  # noqa: E501 - the test's name says what it checks
    profile = load_profile()  # the seed's: 4 s process start, 48 s target weights
    table = load_option_table("0.5.23")
    measurer = OracleMeasurer(profile, table, BenchmarkSpec())
    fits = ServerConfig.build({"--model-path": "Qwen/Qwen3.5-122B-A10B", "--tp-size": 4})
    timings = measurer.deploy(fits)["timings"]
    assert timings["ready_s"] == pytest.approx(startup_s(profile, fits.argv(table))) \
           and timings["ready_s"] > 52
    # 122B of weights on one GPU: out of memory half-way through
    with pytest.raises(DeployFailed) as failed:
        measurer.deploy(
            ServerConfig.build({"--model-path": "Qwen/Qwen3.5-122B-A10B", "--tp-size": 1}))
    assert failed.value.failure_class == "out-of-memory"
    assert failed.value.timings["ready_s"] == pytest.approx(4.0 + 48.0 / 2)


class FailsAfterTheBaseline:
    """Only the first deploy starts; every other fails after a modelled 42 s."""

    def __init__(self) -> None:
        self.deploys = 0

    def deploy(self, config: ServerConfig) -> dict[str, Any]:
        self.deploys += 1
        if self.deploys > 1:
            raise DeployFailed("out-of-memory", "does not fit",
                               timings={"deploy_s": 0.0, "ready_s": 42.0})
        return {"timings": {"deploy_s": 1.0, "ready_s": 9.0}}

    def measure(self, phase_index: int) -> dict[str, Any]:
        return {"per_request_tok_s_mean": 100.0, "aggregate_tok_s": 1000.0, "error_rate": 0.0}


def test_a_failed_starts_own_timings_are_stored_on_the_trial_and_costed() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    spec = load_study_file(STUDIES / "simulated.toml")
    result = evaluate_search(spec, FailsAfterTheBaseline(), n_trials=3, seed=0, sampler="random")
    records = measured_records(result.study)
    assert [r.outcome for r in records] == [Outcome.MEASURED, Outcome.DEPLOY_FAILED,
                                            Outcome.DEPLOY_FAILED]
    assert all(r.timings["ready_s"] == 42.0 and r.timings["deploy_s"] == 0.0 for r in records[1:])
    costs = [CostModel(spec.benchmark).trial(r) for r in records]
    assert [c.startup_s for c in costs] == [10.0, 42.0, 42.0] and costs[0].benchmark_s > 0


def test_the_seed_campaigns_point_costs_a_fixed_wait_and_its_five_level_benchmark() -> None:
    # its steps=4 row
    seeds_speeds = {1: {"per_request_tok_s_mean": 277.0}, 64: {"aggregate_tok_s": 1817.0}}
    point = seed_cost().trial(record(metrics=seeds_speeds, timings={"ready_s": 400.0}))
    # 100 s wait; 512 tokens × (17 at 277, 65 at 4 × 277, then 257, 513 and 1025 requests at 1817
    # tok/s).
    assert point.startup_s == 100.0
    assert point.seconds == pytest.approx(100 + 512 * (17 / 277 + 65 / 1108
                                                       + (257 + 513 + 1025) / 1817))
    assert 10 * 60 < point.seconds < 15 * 60  # the seed's own account: 10–15 minutes a point
    costed = [record(0), record(1), record(2)]
    reached = spend(CostModel(BENCH), costed, 2)
    assert reached.reached and reached.gpu_hours == pytest.approx(2 * 277.0 * 4 / 3600) \
           and reached.trials == 3
    assert not spend(CostModel(BENCH), costed, None).reached
