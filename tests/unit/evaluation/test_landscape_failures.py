"""The landscape API reports every run-failure class (tuner/evaluation/landscape.py
``OracleMeasurer`` over a profile's ``[[faults]]``), and the study's loop stores each as run-failed
and never picks one."""

from __future__ import annotations

from pathlib import Path

import optuna

from tests.helpers import STUDIES, faulty_profile
from tuner.evaluation.landscape import evaluate_search, simulator_landscape
from tuner.store.record import Outcome, measured_records
from tuner.study.load import load_study_file
from tuner.targets.base import FailureCause

FAULTS = """
[[faults]]
kind = "wrong-output"
when = { speculative_eagle_topk = 4 }
after_tokens = 2

[[faults]]
kind = "decode-oom"
when = { speculative_eagle_topk = 2 }
gb_per_token = 5.0

[[faults]]
kind = "hang"
when = { speculative_eagle_topk = 1, cuda_graph_max_bs_decode = 128 }
after_requests = 4

[[faults]]
kind = "server-errors"
when = { speculative_eagle_topk = 1, cuda_graph_max_bs_decode = 32 }
above_running = 16
"""


def test_each_class_is_reported_stored_and_never_the_answer(tmp_path: Path) -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    spec = load_study_file(STUDIES / "simulated.toml")
    landscape = simulator_landscape(spec, profile=str(faulty_profile(tmp_path, FAULTS)))
    result = evaluate_search(spec, landscape, n_trials=16, seed=3, sampler="random")
    failed = [r for r in measured_records(result.study) if r.outcome is Outcome.RUN_FAILED]
    causes = {r.failure_cause for r in failed}
    assert {FailureCause.WRONG_OUTPUT, FailureCause.DECODE_OOM} <= causes, causes
    assert {r.failure_class for r in failed} <= {"wrong-output", "crashed-under-load", "hung"}
    for record in failed:
        assert not record.feasible and not record.is_candidate and record.run_failure
        topk = record.config.flag_dict["--speculative-eagle-topk"] if record.config else None
        assert (record.failure_cause is FailureCause.WRONG_OUTPUT) == (topk == 4)
    assert result.best is not None and result.best.outcome is Outcome.MEASURED
    # a fresh measurer reports the same failure for the same configuration (what ``true_scores``
    # excludes)
    truth = landscape.measurer(0)
    for record in failed[:3]:
        assert record.config is not None
        truth.deploy(record.config)
        assert any(truth.measure(i).get("failure") == record.failure_class for i in range(2))
