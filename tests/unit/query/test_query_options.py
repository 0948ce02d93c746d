"""--weights and --constraint text."""

from __future__ import annotations

import pytest

from tuner.core.errors import UsageError
from tuner.query.options import parse_constraints, parse_weights


def test_weights_parse_against_the_phases() -> None:
    assert parse_weights("c1=0.7,c64=0.3", [1, 64]) == {1: 0.7, 64: 0.3}
    assert parse_weights(" c64 = 1 ", [1, 64]) == {64: 1.0}


@pytest.mark.parametrize(("text", "message"), [
    ("c8=1", "unknown weight key 'c8'; this study's phases are c1, c64"),
    ("c1:0.7", "cannot read"),
    ("c1=fast", "is not a number"),
    ("c1=-1", "must be a number ≥ 0"),
    ("c1=0,c64=0", "all weights are zero"),
    ("c1=1,c1=2", "given twice"),
    ("", "no weights given"),
])
def test_bad_weights_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        parse_weights(text, [1, 64])
    assert info.value.exit_code == 2
    assert "\n" not in str(info.value)


def test_constraints_use_the_study_file_syntax() -> None:
    (c,) = parse_constraints(["c64.ttft_p99_ms<2000"], [1, 64])
    assert (c.phase, c.metric, c.op, c.bound) == (64, "ttft_p99_ms", "<", 2000.0)


@pytest.mark.parametrize(("text", "message"), [
    ("ttft_p99 < 5", "unknown metric 'ttft_p99'"),
    ("c2.error_rate < 1", "no benchmark phase with concurrency 2"),
    ("fast please", "cannot read 'fast please'"),
])
def test_bad_constraints_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_constraints([text], [1, 64])
