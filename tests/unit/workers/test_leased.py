"""A shared study's target (tuner/workers/leased.py) shows what its own target's preflight found."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from tuner.sglang.launch import ServerConfig
from tuner.targets.base import Deployment, DeployPlan, Target
from tuner.workers.leased import LeasedTarget
from tuner.workers.leases import LeaseKeeper


class CarriesUnitOptions(Target):
    """A target whose preflight finds options of the unit that every deploy must keep."""

    kind = "systemd-ssh"

    def preflight(self, flags: Iterable[str]) -> None:
        self.carried = ("--served-model-name", "original")
        self.notes = ("llm.service: carried into every deploy: --served-model-name original",)

    def deploy(self, config: ServerConfig) -> Deployment:
        raise AssertionError("not deployed here")

    def restore(self) -> None:
        pass

    def log_tail(self, lines: int = 50) -> str:
        return ""

    def plan(self, config: ServerConfig) -> DeployPlan:
        return DeployPlan("unit", "", (), (), "")

    def check_access(self) -> tuple[str, ...]:
        return ()


def test_the_leased_target_shows_the_options_and_notes_its_target_found() -> None:
    inner = CarriesUnitOptions()
    leased = LeasedTarget(inner, cast(LeaseKeeper, object()))  # preflight takes no lease
    assert not leased.carried and not leased.notes  # nothing found before the preflight
    leased.preflight(["--speculative-num-steps"])
    assert leased.carried == ("--served-model-name", "original")
    assert leased.notes == inner.notes
    assert any("carried into every deploy" in note for note in leased.notes)
