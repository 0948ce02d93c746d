"""The ``[study] storage`` URL: ``${NAME}`` references expanded from the environment, and relative
SQLite paths resolved against the study file (tuner/study/models.py validates the key with these).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: Storage URL schemes spectune ships a driver for (``postgresql`` alone is SQLAlchemy's name for
#: the same).
STORAGE_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg")

#: ``${NAME}`` in a storage URL: the environment variable NAME (POSIX names; no default syntax, no
#: nesting).
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str) -> str:
    """``value`` with each ``${NAME}`` replaced by the environment variable; one unset (or empty) is
    an error naming it — a study must not fall back to another database because a secret was not
    exported."""
    for name in ENV_REFERENCE.findall(value):
        if not os.environ.get(name):
            raise ValueError(f"environment variable {name} is not set (the URL reads ${{{name}}})")
    return ENV_REFERENCE.sub(lambda m: os.environ[m.group(1)], value)


def resolve_storage(storage: str, folder: Path, *, shown: str | None = None) -> str:
    """Relative SQLite paths are relative to the study file, not to wherever spectune was started.
    ``shown``: the URL as messages quote it (before ``${NAME}`` expansion)."""
    scheme, sep, rest = storage.partition("://")
    if not sep or not re.fullmatch(r"[a-z0-9+]+", scheme):
        quoted = repr(storage if shown is None else shown)
        if shown is not None and shown != storage:
            quoted += " (after expanding its variables, not a URL)"
        raise ValueError(f"not a database URL: {quoted} (e.g. sqlite:///study.db, "
                         "postgresql+psycopg://user@host/db)")
    if scheme not in STORAGE_SCHEMES:
        dialect = scheme.split("+")[0]
        what = (f"database driver {scheme!r}" if dialect in STORAGE_SCHEMES
                else f"database {dialect!r}")
        raise ValueError(f"unsupported {what} (supported: {', '.join(STORAGE_SCHEMES)})")
    if scheme == "sqlite" and rest.startswith("/") and rest != "/:memory:":
        db_path = Path(rest[1:])
        if not db_path.is_absolute():
            db_path = (folder / db_path).resolve()
        if not db_path.parent.is_dir():
            raise ValueError(f"directory {db_path.parent} does not exist")
        return f"{scheme}:///{db_path}"
    return storage
