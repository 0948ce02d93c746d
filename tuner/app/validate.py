"""What ``spectune validate`` reports: the resolved space, its size and an example launch
command."""

from __future__ import annotations

from dataclasses import dataclass

from objectives.prompts import FixedPrompts, load_source
from tuner.core.errors import SpectuneError
from tuner.query.load import open_stored_study
from tuner.sglang.launch import LaunchCommand, ServerConfig, launch_command
from tuner.store.opening import StudyNotFound
from tuner.store.record import TrialRecord, measured_records
from tuner.store.storage import StorageUnavailable, redact, sqlite_unwritable
from tuner.study.dimensions import Dimension
from tuner.study.load import load_study_file
from tuner.study.proposal import SpaceSummary
from tuner.study.space import SearchSpace
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
    #: The configuration tune deploys first (the baseline, else the first valid point).
    config: ServerConfig
    #: What the storage holds of this study, one line (read only: validating never creates a
    #: database).
    stored: str
    #: E.g. the study file changed since the stored study began (``tune`` would refuse to resume
    #: it).
    stored_warnings: tuple[str, ...] = ()
    #: The stored study's measured trials (timings for ``--plan``'s estimate).
    measured: tuple[TrialRecord, ...] = ()
    #: Why ``tune`` could not use the storage now (it would stop with this error's exit code), or
    #: None.
    storage_failure: SpectuneError | None = None
    #: How many prompts the benchmark's dataset holds (None: synthetic prompts, made on demand).
    prompts: int | None = None


#: Points decoded to describe the space's size.
SIZE_SAMPLE = 20_000


def validate_study(path: str) -> ValidationReport:
    """Load ``path`` (raises ``StudyFileError``) and describe the space it defines."""
    spec = load_study_file(path)
    table = spec.option_table
    space = SearchSpace(spec, table)
    # Every point of a space up to this size; a random sample of a larger one (decoding costs ~0.2
    # ms a point, and validate should answer in seconds).
    summary = space.enumerate(limit=SIZE_SAMPLE)
    # The baseline when there is one (it is what runs first), else the first valid point.
    proposal = space.first_proposal(spec.baseline)
    assert proposal.config is not None
    prefix = spec.target.settings.launch_prefix() or DEFAULT_PREFIX
    stored, stored_warnings, measured, failure = describe_stored(spec)
    return ValidationReport(spec, space.dimensions, summary,
                            launch_command(prefix, proposal.config, table),
                            proposal.repairs, proposal.config, stored, stored_warnings, measured,
                            failure, count_prompts(spec))


def count_prompts(spec: StudySpec) -> int | None:
    """The prompts of the benchmark's dataset (the study file's validation has read them once
    already)."""
    source = load_source(spec.benchmark.workload)
    return len(source.prompts) if isinstance(source, FixedPrompts) else None


def describe_stored(spec: StudySpec) -> tuple[str, tuple[str, ...], tuple[TrialRecord, ...],
                                              SpectuneError | None]:
    """One line on the stored study, its warnings, its measured trials, and why ``tune`` could not
    use the storage now (None: it could). Read only: the study's folder is probed, never written."""
    unwritable = sqlite_unwritable(spec.study.storage)
    failure = (StorageUnavailable(f"storage {redact(spec.study.storage)}: {unwritable}")
               if unwritable else None)
    try:
        stored = open_stored_study(spec)
    except StudyNotFound:
        return f"none yet (`spectune tune {spec.path}` starts the study)", (), (), failure
    except SpectuneError as exc:  # StorageUnavailable: its message names the URL redacted
        return f"cannot be read now ({exc})", (), (), exc
    trials = stored.study.get_trials(deepcopy=False)
    measured = tuple(measured_records(stored.study))
    text = f"{len(trials)} trials, {len(measured)} measured (`spectune tune` resumes it)"
    notes = tuple(f"{w} (`spectune tune` refuses to resume it: use a new [study] name)"
                  for w in stored.warnings)
    return text, notes, measured, failure

