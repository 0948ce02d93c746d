"""A landscape's plain answers are read once, at the runner's door, into the typed measurement."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tuner.run.measurement import BadMeasurement, DeployFacts, PhaseMeasurement
from tuner.targets.base import FailureCause, RunFailed


def test_plain_deploy_facts_become_typed() -> None:
    facts = DeployFacts.of({"launch": "steps model", "timings": {"deploy_s": 1, "ready_s": 2.5}})
    assert facts.launch == "steps model" and facts.base_url is None and facts.effective is None
    assert facts.timings == {"deploy_s": 1.0, "ready_s": 2.5}
    assert DeployFacts.of(None) == DeployFacts() and DeployFacts.of(facts) is facts


def test_a_plain_phase_keeps_its_figures_and_types_its_failure() -> None:
    plain = {"aggregate_tok_s": 10.0, "failure": "crashed-under-load", "failure_message": "died",
             "failure_cause": "decode-oom", "log_tail": "CUDA out of memory",
             "run_failure": {"exit": "-9"}}
    measured = PhaseMeasurement.of(64, plain)
    assert measured.figures == {"aggregate_tok_s": 10.0, "failure": "crashed-under-load",
                                "failure_message": "died"}
    assert measured.failure is not None and measured.failure.is_run_failure
    assert measured.failure.cause is FailureCause("decode-oom") \
           and measured.failure.log_tail == "CUDA out of memory"
    assert dict(measured.failure.evidence) == {"exit": "-9"}


def test_a_phase_that_failed_as_a_whole_is_not_a_run_failure() -> None:
    measured = PhaseMeasurement.of(1, {"failure": "simulator-overloaded",
                                       "failure_cause": "not-a-cause"})
    assert measured.failure is not None and not measured.failure.is_run_failure
    assert measured.failure.cause is None and measured.failure.message == "simulator-overloaded"
    assert dict(measured.failure.evidence) == {"phase": "c1", "concurrency": 1}
    assert PhaseMeasurement.of(1, {"x": 1.0}).failure is None


def test_a_raised_run_failure_becomes_a_phase_with_its_cause() -> None:
    exc = RunFailed("hung", "no token for 30 s", cause=None, log_tail="tail")
    measured = PhaseMeasurement.of_run_failed(64, exc)
    assert measured.figures == {"failure": "hung", "failure_message": "no token for 30 s"}
    assert measured.failure is not None and measured.failure.failure_class == "hung"
    assert measured.failure.log_tail == "tail" and measured.failure.evidence["concurrency"] == 64


def test_a_figure_that_is_not_finite_is_a_one_line_error_naming_phase_and_metric() -> None:
    with pytest.raises(BadMeasurement, match=r"phase C=64 aggregate_tok_s = nan"):
        PhaseMeasurement.of(64, {"aggregate_tok_s": float("nan"), "error_rate": 0.0})
    with pytest.raises(BadMeasurement, match=r"phase C=1 ttft_p99_ms = inf"):
        PhaseMeasurement.of(1, {"per_request_tok_s_mean": 50.0, "ttft_p99_ms": math.inf})
    with pytest.raises(BadMeasurement, match=r"C=1 per_request_tok_s_mean_ci = -inf"):
        PhaseMeasurement.of(1, {"per_request_tok_s_mean": 50.0,
                                "per_request_tok_s_mean_ci": [-math.inf, 60.0]})
    with pytest.raises(BadMeasurement, match=r"C=64 aggregate_tok_s = 'fast': not a number"):
        PhaseMeasurement.of(64, {"aggregate_tok_s": "fast"})
    with pytest.raises(BadMeasurement, match=r"timings ready_s = nan"):
        DeployFacts.of({"timings": {"ready_s": float("nan")}})


def test_numpy_numbers_become_pythons_so_every_storage_can_write_them() -> None:
    measured = PhaseMeasurement.of(64, {"aggregate_tok_s": np.float32(1500.5),
                                        "completed": np.int64(256), "ok": True,
                                        "aggregate_tok_s_ci": (np.float64(1400.0), 1600)})
    figures = dict(measured.figures)
    assert figures == {"aggregate_tok_s": 1500.5, "completed": 256, "ok": True,
                       "aggregate_tok_s_ci": [1400.0, 1600]}
    assert type(figures["aggregate_tok_s"]) is float and type(figures["completed"]) is int
    assert figures["ok"] is True
    json.dumps(figures)  # what an RDB storage does with it; numpy's types would raise here
    assert DeployFacts.of({"timings": {"ready_s": np.float32(2.5)}}).timings == {"ready_s": 2.5}


def test_a_failed_phase_keeps_its_failure_and_drops_a_figure_that_is_not_finite() -> None:
    measured = PhaseMeasurement.of(64, {"failure": "crashed-under-load", "failure_message": "died",
                                        "aggregate_tok_s": float("nan"), "completed": np.int32(3)})
    assert measured.failure is not None and measured.failure.is_run_failure
    assert dict(measured.figures) == {"failure": "crashed-under-load", "failure_message": "died",
                                      "aggregate_tok_s": None, "completed": 3}
