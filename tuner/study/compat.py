"""Check a study against one SGLang release's option table — the target's own, read at preflight.

A study file is loaded against a shipped table (``[study] sglang_version``'s, or the nearest shipped
one); the target may run another release. ``check_study`` runs the study file's flag checks again
with the table the target's SGLang supplies: the same names, abbreviations, types and choices
SGLang's parser applies. A setting SGLang renamed is mapped to that release's spelling (the returned
spec uses it); a flag or value the release lacks is a problem naming the flag, its other spelling if
any, and the releases that have it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tuner.core.errors import StudyFileError
from tuner.sglang import versions
from tuner.sglang.options import OptionTable
from tuner.study.load import load_study_file
from tuner.study.spec import StudySpec


@dataclass(frozen=True)
class TableCheck:
    """What one release's table says about a study."""

    #: The study with its flags named as this release names them (run it with
    #: ``spec.option_table``).
    spec: StudySpec
    #: One informative line when the study names another release than the table's (else None).
    note: str | None
    #: One line per flag or value this release does not take: the study cannot run on it.
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def check_study(spec: StudySpec, table: OptionTable) -> TableCheck:
    """``spec``'s flags checked against ``table`` (e.g. the target's SGLang's,
    ``OptionTable.from_json``)."""
    note = version_note(spec.study.sglang_version, table)
    try:
        checked = load_study_file(spec.path, table)
    except StudyFileError as exc:
        return TableCheck(spec, note, tuple(exc.problems))
    adapted = replace(spec, server_flags=checked.server_flags, search=checked.search,
                      baseline=checked.baseline, table=table, table_note=None)
    # Flags this release does not spell as the study's table did (its aliases aside): SGLang renamed
    # them.
    renamed = sorted({f"{old} as {new}" for old,
                      new in zip(_flags(spec), _flags(adapted), strict=True)
                      if table.by_option(old) is None})
    if renamed and note is None:
        note = (f"SGLang {table.version} spells {', '.join(renamed)}: the study's flags are mapped "
                "to those names")
    return TableCheck(adapted, note, ())


def version_note(study_version: str | None, table: OptionTable) -> str | None:
    """One line when the study names another SGLang release than ``table``'s; None when they agree —
    a post-release agrees with its base release unless its table differs from the shipped one."""
    if study_version is None or study_version == table.version:
        return None
    shipped = versions.table_for(study_version).table
    if versions.base_release(study_version) == versions.base_release(table.version) \
            and shipped.fingerprint == table.fingerprint:
        return None
    return (f"the study names SGLang {study_version}; the target runs SGLang {table.version}, "
            "whose own option table checks the study's flags")


def _flags(spec: StudySpec) -> list[str]:
    return [*spec.server_flags, *(p.flag for p in spec.search), *spec.baseline]
