"""The target a study file describes, built from its ``[target]`` settings."""

from __future__ import annotations

from tuner.study.spec import StudySpec
from tuner.targets.base import Target
from tuner.targets.settings import Placement


def placement_of(spec: StudySpec) -> Placement:
    return Placement(study=spec.study.name, base_dir=spec.path.resolve().parent)


def make_target(spec: StudySpec) -> Target:
    """The target ``spec`` describes. Nothing is contacted until the first call on it."""
    return spec.target.settings.make_target(placement_of(spec), spec.option_table)
