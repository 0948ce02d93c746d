"""A cache, in the study's storage, of the option tables the targets' SGLang supplied at preflight.

Reading the table from the target's SGLang means importing it there (seconds, a process with torch
loaded); a resumed study or another worker on the same release and build finds it here instead. One
study user attribute per SGLang version and build, holding the table in the shipped JSON format
(tuner/sglang/data), compressed: ~5-10 KB a table, so it fits any Optuna storage's attribute column.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any, Protocol

from tuner.sglang.options import OptionTable
from tuner.store.keys import StudyKey


class StudyAttrs(Protocol):
    """What of an ``optuna.Study`` the cache uses (a real study, or one read with
    ``load_study``)."""

    @property
    def user_attrs(self) -> dict[str, Any]: ...

    def set_user_attr(self, key: str, value: Any) -> None: ...


def store_table(study: StudyAttrs, table: OptionTable, build: str | None = None) -> None:
    """Keep ``table`` for its version and ``build`` (default: the table's fingerprint)."""
    text = json.dumps(table.to_json(), separators=(",", ":"), sort_keys=True)
    packed = base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii")
    study.set_user_attr(StudyKey.sglang_table(table.version, build or table.fingerprint), packed)


def cached_table(study: StudyAttrs, version: str, build: str) -> OptionTable | None:
    """The table stored for SGLang ``version`` and ``build``; None when absent or unreadable (read
    it again)."""
    packed = study.user_attrs.get(StudyKey.sglang_table(version, build))
    if not isinstance(packed, str):
        return None
    try:
        table = OptionTable.from_json(
            json.loads(zlib.decompress(base64.b64decode(packed)).decode("utf-8")))
    except (ValueError, KeyError, TypeError, zlib.error):
        return None
    return table if table.version == version else None


def cached_tables(study: StudyAttrs) -> list[OptionTable]:
    """Every table this study's storage holds (what ``spectune validate``/the report can name)."""
    found = []
    for key in sorted(study.user_attrs):
        if key.startswith("sglang_table:"):
            _, version, build = key.split(":", 2)
            table = cached_table(study, version, build)
            if table is not None:
                found.append(table)
    return found
