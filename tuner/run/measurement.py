"""What a ``Measurer`` reports, typed: the facts of a start (``DeployFacts``) and one phase
(``PhaseMeasurement``).

The study's measurer (tuner/run/measure.py) builds these from the load generator's ``PhaseResult``
and the target's ``Deployment``. A landscape's measurer (docs/benchmarks.md) may answer in the plain
form the landscape API documents — a mapping of facts, a mapping of metrics with ``failure`` keys —
and ``of`` reads that form once, at the trial runner's door, so nothing past it handles untyped
results.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from objectives.scoring import PhaseFigures, primary_metric
from tuner.core.errors import SpectuneError
from tuner.targets.base import RUN_FAILURE_CLASSES, FailureCause, RunFailed

#: The keys of the plain form that describe a phase's failure rather than measure it: not kept in
#: the phase's stored figures (``failure`` and ``failure_message`` are: readers of stored phases
#: look for them).
FAILURE_EVIDENCE: Final = ("run_failure", "log_tail", "failure_cause")
_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


class BadMeasurement(SpectuneError):
    """A measurer answered a figure that is not a finite number (NaN, infinity, text where the
    score's metric belongs): a defect of the measurer — a landscape's — told in one line, never
    stored as a score (a NaN score would fail the trial inside Optuna and rank nowhere)."""

    exit_code = 2


@dataclass(frozen=True)
class DeployFacts:
    """A started server: how it was launched, where it answers and logs, what its SGLang resolved,
    how long the start took (seconds; None where the measurer did not time it)."""

    launch: str | None = None
    base_url: str | None = None
    log: str | None = None
    #: The values the target's own SGLang runs (tuner/targets/resolver.py); None: spectune's rules
    #: decided.
    effective: Mapping[str, object] | None = None
    timings: Mapping[str, float] = field(default_factory=lambda: _EMPTY)

    @classmethod
    def of(cls, facts: DeployFacts | Mapping[str, Any] | None) -> DeployFacts:
        """``facts`` as a landscape's measurer may give them: ``{"launch": …, "base_url": …, "log":
        …, "effective": {…}, "timings": {"deploy_s": …, "ready_s": …}}`` (every key optional), or
        typed already."""
        if isinstance(facts, DeployFacts):
            return facts
        facts = facts or {}
        effective = facts.get("effective")
        timings = facts.get("timings") or {}
        return cls(launch=_text(facts.get("launch")), base_url=_text(facts.get("base_url")),
                   log=_text(facts.get("log")), effective=dict(effective) if effective else None,
                   timings={str(k): _number(v, f"the deploy's timings {k}")
                            for k, v in timings.items()})


@dataclass(frozen=True)
class PhaseFailure:
    """Why a phase is not a measurement. ``is_run_failure``: the configuration failed while measured
    (crashed, hung, answered wrongly) — its trial ends run-failed; otherwise the phase failed as a
    whole (the host, e.g. ``simulator-overloaded``) and is measured again."""

    failure_class: str
    message: str
    cause: FailureCause | None = None
    #: {"phase": "c64", "concurrency": 64, "exit": …, "errors": {…}, "completed": n, "failed": n}
    evidence: Mapping[str, object] = field(default_factory=lambda: _EMPTY)
    log_tail: str = ""

    @property
    def is_run_failure(self) -> bool:
        return self.failure_class in RUN_FAILURE_CLASSES


@dataclass(frozen=True)
class PhaseMeasurement:
    """One benchmark phase on the deployed server: its figures in the stored form (metric name →
    value, what scoring, constraints and reports read) and, when it failed, why."""

    concurrency: int
    figures: PhaseFigures
    failure: PhaseFailure | None = None

    @classmethod
    def of(cls, concurrency: int, result: PhaseMeasurement | Mapping[str, Any]) -> PhaseMeasurement:
        """A phase in the plain form (figures plus ``failure``, ``failure_message``,
        ``failure_cause``, ``run_failure``, ``log_tail``), or typed already."""
        if isinstance(result, PhaseMeasurement):
            return result
        failure = None
        if result.get("failure"):
            failure_class = str(result["failure"])
            stored_cause = result.get("failure_cause")
            known = isinstance(stored_cause,
                               str) and stored_cause in FailureCause.__members__.values()
            cause = FailureCause(str(stored_cause)) if known else None
            failure = PhaseFailure(
                failure_class=failure_class,
                message=str(result.get("failure_message") or failure_class), cause=cause,
                evidence=dict(result.get("run_failure")
                              or {"phase": f"c{concurrency}", "concurrency": concurrency}),
                log_tail=str(result.get("log_tail") or ""))
        figures = _plain({k: v for k, v in result.items() if k not in FAILURE_EVIDENCE},
                         f"phase C={concurrency}", strict=failure is None)
        if failure is None and figures.get(primary_metric(concurrency)) is not None:
            _number(figures[primary_metric(concurrency)],
                    f"phase C={concurrency} {primary_metric(concurrency)}")
        return cls(concurrency, figures, failure)

    @classmethod
    def of_run_failed(cls, concurrency: int, exc: RunFailed) -> PhaseMeasurement:
        """A measurer's typed run failure (a landscape's crash under load): no figures but the
        failure's own."""
        failure = PhaseFailure(exc.failure_class, exc.message, exc.cause,
                               {"phase": f"c{concurrency}", "concurrency": concurrency},
                               exc.log_tail)
        return cls(concurrency, {"failure": exc.failure_class, "failure_message": exc.message},
                   failure)


def _plain(value: Any, where: str, *, strict: bool = True) -> Any:
    """``value`` with numpy's (and any other) number types as Python's, so that every storage can
    write it; a number that is not finite is a ``BadMeasurement`` — or, in a phase that failed
    (``strict`` False), None: what a failed phase measured is evidence, never a score."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v, f"{where} {k}", strict=strict) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, where, strict=strict) for v in value]
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not strict and not math.isfinite(float(value)):
            return None
        return _number(value, where)
    return value


def _number(value: object, where: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise BadMeasurement(f"measurer: {where} = {value!r}: not a number")
    if isinstance(value, numbers.Integral):
        return int(value)
    if not math.isfinite(float(value)):
        raise BadMeasurement(f"measurer: {where} = {value!r}: every figure must be a finite number "
                             "(a configuration that fails raises DeployFailed or RunFailed)")
    return float(value)


def _text(value: object) -> str | None:
    return str(value) if value else None
