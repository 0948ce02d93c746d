"""A landscape checkable by hand, plugged in as users plug theirs (docs/benchmarks.md shows the same
code): more speculative steps are faster at C=1 and C=64, every other flag is irrelevant, and top-k
4 never starts."""

from __future__ import annotations

from typing import Any

from tuner.evaluation.landscape import DeployFailed, MeasuredLandscape, ServerConfig
from tuner.study.spec import StudySpec


class StepsMeasurer:
    def deploy(self, config: ServerConfig) -> dict[str, Any]:
        if config.get("--speculative-eagle-topk") == 4:
            raise DeployFailed("out-of-memory", "top-k 4 does not fit")
        self.steps = int(config.get("--speculative-num-steps"))
        return {"launch": "steps model", "timings": {"deploy_s": 0.0, "ready_s": 0.0}}

    def measure(self, phase_index: int) -> dict[str, Any]:
        return {"per_request_tok_s_mean": 100.0 + 10 * self.steps,
                "aggregate_tok_s": 1000.0 + 100 * self.steps, "error_rate": 0.0}


def landscape(spec: StudySpec) -> MeasuredLandscape:
    """The bench's --landscape FACTORY: called with the study spec."""
    return MeasuredLandscape(spec, lambda seed: StepsMeasurer())
