"""The compact phase syntax of the command line: ``C=64:n=256``, ``C=64:t=30s``,
``C=1:n=8:warmup=1``, ``C=64:n=512:ci=0.02``, ``C=64:t=2m:deadline=5m``.

Keys: ``C`` concurrency (required), ``n`` measured requests, ``t`` duration, ``warmup`` requests,
``ci`` relative half-width that stops the phase early, ``deadline`` for the whole phase. Without
``n`` and ``t`` a phase measures 8 requests at C=1 and 4·C otherwise (the study file's rule).
"""

from __future__ import annotations

from objectives.spec import PhaseSpec
from tuner.core.durations import parse_duration
from tuner.core.errors import UsageError

_EXAMPLE = "e.g. C=64:n=256, C=64:t=30s, C=1:n=8:warmup=1, C=64:n=512:ci=0.02"
_KEYS = ("c", "n", "t", "warmup", "ci", "deadline")


def parse_phase(text: str) -> PhaseSpec:
    """A ``PhaseSpec`` from one ``--phase`` value; ``UsageError`` with a one-line reason
    otherwise."""
    values: dict[str, str] = {}
    for part in text.strip().split(":"):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or not value.strip():
            raise UsageError(f"phase {text!r}: {part!r} is not KEY=VALUE ({_EXAMPLE})")
        if key not in _KEYS:
            raise UsageError(
                f"phase {text!r}: unknown key {key!r} (keys: C, n, t, warmup, ci, deadline)")
        if key in values:
            raise UsageError(f"phase {text!r}: {key!r} given twice")
        values[key] = value.strip()
    if "c" not in values:
        raise UsageError(f"phase {text!r}: missing the concurrency C ({_EXAMPLE})")
    concurrency = _integer(text, "C", values["c"], minimum=1)
    requests = _integer(text, "n", values["n"], minimum=1) if "n" in values else None
    duration = _seconds(text, "t", values["t"]) if "t" in values else None
    if requests is None and duration is None:
        requests = 8 if concurrency == 1 else 4 * concurrency
    warmup = _integer(text, "warmup", values["warmup"], minimum=0) if "warmup" in values else 1
    ci = None
    if "ci" in values:
        try:
            ci = float(values["ci"].rstrip("%")) / (100 if values["ci"].endswith("%") else 1)
        except ValueError:
            raise UsageError(f"phase {text!r}: ci must be a fraction such as 0.02 or 2%") from None
        if not 0 < ci < 1:
            raise UsageError(
                f"phase {text!r}: ci must be between 0 and 1 (e.g. 0.02), not {values['ci']}")
    deadline = _seconds(text, "deadline",
                        values["deadline"]) if "deadline" in values else PhaseSpec.deadline_s
    return PhaseSpec(concurrency=concurrency, requests=requests, duration_s=duration, warmup=warmup,
                     ci_target=ci, deadline_s=deadline)


def format_phase(spec: PhaseSpec) -> str:
    """The inverse of ``parse_phase`` (for messages and tables)."""
    parts = [f"C={spec.concurrency}"]
    if spec.requests is not None:
        parts.append(f"n={spec.requests}")
    if spec.duration_s is not None:
        parts.append(f"t={spec.duration_s:g}s")
    parts.append(f"warmup={spec.warmup}")
    if spec.ci_target is not None:
        parts.append(f"ci={spec.ci_target:g}")
    return ":".join(parts)


def _integer(text: str, key: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"phase {text!r}: {key} must be a whole number, not {value!r}") from None
    if number < minimum:
        raise UsageError(f"phase {text!r}: {key} must be at least {minimum}, not {number}")
    return number


def _seconds(text: str, key: str, value: str) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise UsageError(f"phase {text!r}: {key}: {exc}") from None
    if seconds <= 0:
        raise UsageError(f"phase {text!r}: {key} must be longer than 0 s")
    return seconds
