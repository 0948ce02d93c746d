"""Deployment targets: where and how a server configuration is applied (see ``base.Target``).

Each kind's ``[target]`` settings model builds its target (``TargetSettings.make_target``); the
kinds are listed once, in ``registry``. Targets know nothing of study files:
``tuner.study.target.make_target`` builds the one a study file describes.
"""

from __future__ import annotations

from tuner.targets.base import DeployFailed, Deployment, FailureClass, Target, TargetUnavailable

__all__ = ["DeployFailed", "Deployment", "FailureClass", "Target", "TargetUnavailable"]
