from __future__ import annotations

import pytest

from objectives.phase_syntax import format_phase, parse_phase
from objectives.spec import PhaseSpec
from tuner.core.errors import UsageError


@pytest.mark.parametrize(("text", "expected"), [
    ("C=64:n=256", PhaseSpec(64, requests=256)),
    ("c=64:t=30s", PhaseSpec(64, duration_s=30.0)),
    ("C=1:n=8:warmup=1", PhaseSpec(1, requests=8, warmup=1)),
    ("C=64:n=512:ci=0.02", PhaseSpec(64, requests=512, ci_target=0.02)),
    ("C=64:t=2m:ci=2%:deadline=5m:warmup=0",
     PhaseSpec(64, duration_s=120.0, ci_target=0.02, deadline_s=300.0,
               warmup=0)),
    ("C=1", PhaseSpec(1, requests=8)),
    ("C=16", PhaseSpec(16, requests=64)),
])
def test_valid_phases(text: str, expected: PhaseSpec) -> None:
    assert parse_phase(text) == expected


@pytest.mark.parametrize(("text", "fragment"), [
    ("n=8", "missing the concurrency"),
    ("C=0:n=8", "at least 1"),
    ("C=4:n=lots", "whole number"),
    ("C=4:x=1", "unknown key"),
    ("C=4:n", "KEY=VALUE"),
    ("C=4:t=soon", "duration"),
    ("C=4:ci=2", "between 0 and 1"),
    ("C=4:n=1:n=2", "twice"),
])
def test_bad_phases_are_one_line_usage_errors(text: str, fragment: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_phase(text)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message
    assert info.value.exit_code == 2


def test_format_round_trips() -> None:
    spec = PhaseSpec(64, requests=512, warmup=8, ci_target=0.02)
    assert parse_phase(format_phase(spec)) == spec
