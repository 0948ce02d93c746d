"""Opening a stored study for reading: the one way every reader (``validate``, ``best``, ``trials``,
``report``, ``dashboard``, ``deploy``) opens one, and it never writes.

Two things would write: Optuna's storage creates a missing SQLite file, and it creates its tables in
any database that lacks them (``RDBStorage.__init__``). So before a storage is made, the SQLite file
must exist and the database must already hold Optuna's tables; ``optuna.load_study`` itself never
creates a study (a missing name is a ``KeyError``, on SQLite and PostgreSQL alike). Every URL in a
message goes through ``redact``.
"""

from __future__ import annotations

import optuna

from tuner.core.errors import SpectuneError
from tuner.store.storage import (
    StorageUnavailable,
    first_line,
    is_server_database,
    make_storage,
    redact,
    sqlite_path,
    with_storage_retries,
)
from tuner.study.spec import StudySpec

#: A reader waits this long for a database server, not the minutes of an OS TCP timeout.
CONNECT_TIMEOUT_S = 10
#: Optuna's table of studies: present in every database Optuna has written to.
STUDIES_TABLE = "studies"


class StudyNotFound(SpectuneError):
    """The study was never run, or has nothing in it yet to answer with."""

    exit_code = 2


def never_run(spec: StudySpec) -> str:
    return f"study {spec.study.name!r} has never run (run `spectune tune {spec.path}` first)"


def open_existing_study(spec: StudySpec) -> optuna.Study:
    """The study ``spec`` names, from its storage; ``StudyNotFound`` (exit 2) if it was never run,
    ``StorageUnavailable`` (exit 4) if the storage cannot be read. Creates nothing."""
    url, name = spec.study.storage, spec.study.name
    db = sqlite_path(url)
    if db is not None and not db.exists():
        raise StudyNotFound(f"{never_run(spec)}: no database at {db}")
    if not _has_optuna_tables(url):
        raise StudyNotFound(f"{never_run(spec)}: {redact(url)} holds no Optuna study")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(url)
    try:
        return with_storage_retries(lambda: optuna.load_study(study_name=name, storage=storage),
                                    "loading", url)
    except KeyError:
        raise StudyNotFound(f"{never_run(spec)}: {redact(url)} has no study of that name") from None


def _has_optuna_tables(url: str) -> bool:
    import sqlalchemy

    # libpq and both MySQL drivers take connect_timeout; SQLite is a local file.
    connect_args = {"connect_timeout": CONNECT_TIMEOUT_S} if is_server_database(url) else {}
    try:
        engine = sqlalchemy.create_engine(url, connect_args=connect_args)
    except Exception as exc:  # a bad URL or a missing driver: sqlalchemy raises many types
        raise StorageUnavailable(f"cannot open storage {redact(url)}: {first_line(exc)}") from None
    try:
        return sqlalchemy.inspect(engine).has_table(STUDIES_TABLE)
    except Exception as exc:  # unreachable server, wrong password, not a database file, ...
        raise StorageUnavailable(f"cannot open storage {redact(url)}: {first_line(exc)}") from None
    finally:
        engine.dispose()
