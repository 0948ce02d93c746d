"""A target kind is a class with the whole contract: one that leaves out its plan or access check
cannot be made."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from tuner.sglang.launch import ServerConfig
from tuner.targets.base import Deployment, Target


class WithoutPlan(Target):
    kind = "local"

    def preflight(self, flags: Iterable[str]) -> None:
        pass

    def deploy(self, config: ServerConfig) -> Deployment:
        raise AssertionError("never deployed")

    def restore(self) -> None:
        pass

    def log_tail(self, lines: int = 50) -> str:
        return ""


def test_a_kind_without_plan_or_access_check_is_refused_when_made_not_at_validate_plan() -> None:
    with pytest.raises(TypeError, match="abstract") as caught:
        WithoutPlan()  # type: ignore[abstract]
    assert "plan" in str(caught.value) and "check_access" in str(caught.value)


def test_a_kind_without_a_log_file_says_so() -> None:
    class Complete(WithoutPlan):
        def plan(self, config: ServerConfig):  # type: ignore[no-untyped-def]
            raise AssertionError

        def check_access(self) -> tuple[str, ...]:
            return ()

    assert Complete().log_location is None
