"""Deployment targets: where and how a server configuration is applied (see ``base.Target``).

Each kind's ``[target]`` settings model builds its target (``TargetSettings.make_target``); the kinds are listed
once, in ``registry``.
"""

from __future__ import annotations

from tuner.sglang.options import load_option_table
from tuner.study.spec import StudySpec
from tuner.targets.base import DeployFailed, Deployment, FailureClass, Target, TargetUnavailable

__all__ = ["DeployFailed", "Deployment", "FailureClass", "Target", "TargetUnavailable", "make_target"]


def make_target(spec: StudySpec) -> Target:
    """The target a study file describes. Nothing is contacted until the first call on it."""
    return spec.target.settings.make_target(spec, load_option_table(spec.study.sglang_version))
