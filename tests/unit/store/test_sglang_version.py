"""The SGLang the target's preflight found installed is recorded on the study before the first
trial."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import optuna
import pytest

from tests.study_factory import write_study_file
from tuner.app.tune import run_study
from tuner.sglang.launch import ServerConfig
from tuner.store.keys import StudyKey
from tuner.store.storage import make_storage
from tuner.study.load import load_study_file
from tuner.targets.base import Deployment, DeployPlan, Target, TargetUnavailable


class Unplugged(TargetUnavailable):
    retryable = False  # the study stops at the first deploy, without back-offs


class InstalledOnly(Target):
    """A target whose preflight finds SGLang 0.5.23 and whose first deploy finds the host gone."""

    kind = "local"

    def preflight(self, flags: Iterable[str]) -> None:
        pass

    def installed_sglang(self) -> str | None:
        return "0.5.23"

    def deploy(self, config: ServerConfig) -> Deployment:
        raise Unplugged("the host is unplugged")

    def restore(self) -> None:
        pass

    def log_tail(self, lines: int = 50) -> str:
        return ""

    def plan(self, config: ServerConfig) -> DeployPlan:
        return DeployPlan("command line", "", (), (), "")

    def check_access(self) -> tuple[str, ...]:
        raise Unplugged("the host is unplugged")


def test_the_installed_version_is_stored_on_the_study(tmp_path: Path) -> None:
    spec = load_study_file(write_study_file(tmp_path))
    with pytest.raises(TargetUnavailable, match="unplugged"):
        run_study(spec, n_trials=1, target=InstalledOnly(), confirm=0)
    study = optuna.load_study(study_name=spec.study.name, storage=make_storage(spec.study.storage))
    assert study.user_attrs[StudyKey.SGLANG_VERSION] == "0.5.23"
