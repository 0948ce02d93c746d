"""Running the output check inside a trial (tuner/run/outputs.py says what it measures and how it
judges).

A measurer that can generate the probe (``Probing``: the study's ``TargetMeasurer``) is asked once
per deployed configuration, before its phases: a configuration that answers wrongly is not worth
benchmarking. The reference configuration (the baseline) is asked twice — its prompts at once, then
one at a time — for the noise floor. A measurer that cannot (a landscape's) is not checked; a
landscape reports wrong output as a phase failure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import optuna
from optuna.trial import TrialState

from objectives.probe import ProbeOutput
from tuner.core import interrupts
from tuner.run.outputs import Reference, judge, make_reference
from tuner.run.running_trial import RunningTrial
from tuner.store.keys import Key, StudyKey
from tuner.study.spec import OutputCheckSpec


@runtime_checkable
class Probing(Protocol):
    def outputs(self, count: int, max_tokens: int, *, concurrent: bool = True) -> tuple[ProbeOutput,
                                                                                        ...]:
        """The deployed server's greedy answers to the workload's probe prompts
        (objectives/probe.py)."""


@dataclass(frozen=True)
class CheckResult:
    record: dict[str, object]  # stored as ``Key.OUTPUT_CHECK``
    seconds: float  # what the check added to the trial
    failure: str | None = None  # the wrong-output message, when the configuration failed


def check_outputs(trial: RunningTrial, spec: OutputCheckSpec, measurer: object,
                  workload_temperature: float) -> CheckResult | None:
    """Check the deployed configuration's outputs; None when this measurer cannot be asked."""
    study = trial.study
    if not spec.outputs:
        if study.user_attrs.get(StudyKey.OUTPUT_CHECK_OFF) != spec.reason:
            study.set_user_attr(StudyKey.OUTPUT_CHECK_OFF, spec.reason)
        return CheckResult({"result": "off", "reason": spec.reason}, 0.0)
    if not isinstance(measurer, Probing):
        return None
    started = time.monotonic()
    greedy = {"temperature": 0.0, "workload_temperature": workload_temperature,
              "prompts": spec.prompts, "max_tokens": spec.max_tokens}
    reference = Reference.from_json(study.user_attrs.get(StudyKey.OUTPUT_REFERENCE))
    if reference is None:
        if not trial.is_baseline and _baseline_pending(study, trial.number):
            return CheckResult({**greedy, "result": "unchecked",
                                "why": "the baseline's reference outputs were not measured yet"},
                               0.0)
        batched = measurer.outputs(spec.prompts, spec.max_tokens, concurrent=True)
        interrupts.check()
        one_by_one = measurer.outputs(spec.prompts, spec.max_tokens, concurrent=False)
        interrupts.check()
        made = make_reference(trial.number, batched, one_by_one)
        if made is None:
            return CheckResult({**greedy, "result": "unchecked",
                                "why": "the reference configuration answered too few probe "
                                       "prompts"},
                               time.monotonic() - started)
        study.set_user_attr(StudyKey.OUTPUT_REFERENCE, made.to_json())
        return CheckResult({**greedy, "result": "reference",
                            "statistic": "mean common-prefix fraction",
                            "floor": made.floor, "floor_exact_rate": made.floor_exact_rate,
                            "threshold": made.threshold}, time.monotonic() - started)
    outputs = measurer.outputs(spec.prompts, spec.max_tokens, concurrent=True)
    interrupts.check()
    verdict = judge(reference, outputs)
    return CheckResult({**greedy, **verdict.record}, time.monotonic() - started,
                       None if verdict.passed else verdict.message)


def _baseline_pending(study: optuna.Study, number: int) -> bool:
    """The baseline is queued or being measured by another worker: its outputs will be the
    reference."""
    return any(t.user_attrs.get(Key.BASELINE) and t.number != number
               for t in study.get_trials(deepcopy=False,
                                         states=(TrialState.WAITING, TrialState.RUNNING)))
