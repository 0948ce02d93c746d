"""Opening a stored study for reading, with one clear error for each way it can be missing.

Opening an SQLite URL whose file does not exist would make Optuna create an empty database; a query must
never write, so that case is caught before any storage is opened.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import optuna

from tuner.core.errors import SpectuneError
from tuner.engine.fingerprint import changed_sections, describe_change
from tuner.engine.storage import make_storage, redact, sqlite_path, with_storage_retries
from tuner.study.file import load_study_file
from tuner.study.spec import StudySpec


class StudyNotFound(SpectuneError):
    """The study was never run, or has nothing in it yet to answer with."""

    exit_code = 2


@dataclass(frozen=True)
class StoredStudy:
    spec: StudySpec
    study: optuna.Study
    #: Things the user should know about before trusting an answer (e.g. the study file changed).
    warnings: tuple[str, ...] = ()


def open_stored_study(path: str | Path) -> StoredStudy:
    """The study file, validated, and its study from storage; ``StudyNotFound`` if it has never run."""
    spec = load_study_file(path)
    url, name = spec.study.storage, spec.study.name
    never_run = f"study {name!r} has never run (run `spectune tune {spec.path}` first)"
    db = sqlite_path(url)
    if db is not None and not db.exists():
        raise StudyNotFound(f"{never_run}: no database at {db}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():  # the heartbeat settings are "experimental"; a reader needs no such note
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = make_storage(url)
    try:
        study = with_storage_retries(lambda: optuna.load_study(study_name=name, storage=storage), "loading", url)
    except KeyError:
        raise StudyNotFound(f"{never_run}: {redact(url)} has no study of that name") from None
    notes = []
    changed = changed_sections(study, spec)
    if changed:
        notes.append(f"{describe_change(spec, changed)}; stored trials were measured under the old settings")
    return StoredStudy(spec, study, tuple(notes))
