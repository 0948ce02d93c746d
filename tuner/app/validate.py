"""What ``spectune validate`` reports: the resolved space, its size and an example launch command."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.sglang.launch import LaunchCommand, launch_command
from tuner.sglang.options import load_option_table
from tuner.study.file import load_study_file
from tuner.study.space import Dimension, SearchSpace, SpaceSummary
from tuner.study.spec import StudySpec

#: What the launch command starts with when the target does not say (simulated: the real server's).
DEFAULT_PREFIX = ("python3", "-m", "sglang.launch_server")


@dataclass(frozen=True)
class ValidationReport:
    spec: StudySpec
    dimensions: tuple[Dimension, ...]
    summary: SpaceSummary
    example: LaunchCommand
    example_repairs: tuple[str, ...]


def validate_study(path: str) -> ValidationReport:
    """Load ``path`` (raises ``StudyFileError``) and describe the space it defines."""
    spec = load_study_file(path)
    table = load_option_table(spec.study.sglang_version)
    space = SearchSpace(spec, table)
    summary = space.enumerate()
    # The baseline when there is one (it is what runs first), else the first valid point.
    proposal = space.decode(space.encode(spec.baseline)) if _covers(space, spec) else None
    if proposal is None or proposal.config is None:
        proposal = next(p for p in map(space.decode, space.points()) if p.config is not None)
    assert proposal.config is not None
    prefix = spec.target.settings.launch_prefix() or DEFAULT_PREFIX
    return ValidationReport(spec, space.dimensions, summary, launch_command(prefix, proposal.config, table),
                            proposal.repairs)


def _covers(space: SearchSpace, spec: StudySpec) -> bool:
    return bool(spec.baseline) and set(space.encode(spec.baseline)) == {d.name for d in space.dimensions}
