"""A stored study with its study file, for the commands that answer from it (nothing is measured,
nothing written).

Opening itself is tuner/store/opening.py's, shared with every other reader; here the study file's
changes since the study began become warnings, since an answer from trials measured under other
settings needs one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import optuna

from tuner.store.fingerprint import changed_sections, describe_change
from tuner.store.keys import StudyKey
from tuner.store.opening import StudyNotFound, open_existing_study
from tuner.study.load import load_study_file
from tuner.study.spec import StudySpec

__all__ = ["StoredStudy", "StudyNotFound", "open_stored_study"]


@dataclass(frozen=True)
class StoredStudy:
    spec: StudySpec
    study: optuna.Study
    #: Things the user should know about before trusting an answer (e.g. the study file changed).
    warnings: tuple[str, ...] = ()

    @property
    def carried(self) -> tuple[str, ...]:
        """The systemd unit's own options the study's deploys keep (``[target] unit_flags =
        "carry"``)."""
        stored = self.study.user_attrs.get(StudyKey.UNIT_OPTIONS)
        return tuple(str(w) for w in stored) if isinstance(stored, list) else ()


def open_stored_study(study_file: str | Path | StudySpec) -> StoredStudy:
    """The study file (a path, validated, or an already loaded spec) and its study from storage;
    ``StudyNotFound`` if it has never run."""
    spec = study_file if isinstance(study_file, StudySpec) else load_study_file(study_file)
    study = open_existing_study(spec)
    notes = []
    changed = changed_sections(study, spec)
    if changed:
        notes.append(
            f"{describe_change(spec, changed)}; stored trials were measured under the old settings")
    return StoredStudy(spec, study, tuple(notes))
