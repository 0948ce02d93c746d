from __future__ import annotations

import pytest

from tuner.core.durations import format_duration, parse_duration


@pytest.mark.parametrize(("text", "seconds"),
                         [(90, 90.0), ("45s", 45.0), ("30m", 1800.0), ("8h", 28800.0),
                          ("1h30m", 5400.0), ("250ms", 0.25), ("12", 12.0)])
def test_parse_duration(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["8 hours", "h", "1x", "-3", "30m5"])
def test_parse_duration_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_format_duration() -> None:
    assert format_duration(5400) == "1h30m"
    assert format_duration(75) == "1m15s"
    assert format_duration(9.6) == "10s"
