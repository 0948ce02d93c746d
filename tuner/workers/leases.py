"""Leases and study-wide mutexes in the study's own database, for several workers on one study.

Optuna coordinates trials but knows nothing of hosts, so a small table of ours sits beside Optuna's
tables in the same PostgreSQL (or MySQL) database: one row per (study, resource), with its holder
and an expiry taken from the *database's* clock, so the workers' clocks never matter.

- A **host lease** (resource ``host:<name>``) is won by exactly one worker: by INSERT (the primary
  key lets only one concurrent INSERT through) or, when the row exists, by a conditional UPDATE that
  only matches an expired row or one we hold. PostgreSQL row-locks the row for the UPDATE and
  re-checks the WHERE clause of a waiting UPDATE once the first commits, so two workers reclaiming
  one dead worker's host cannot both win. The holder renews it every heartbeat interval; a worker
  silent for the grace period loses it.
- A **mutex** (resource ``mutex:<name>``) is the same row held with ``SELECT … FOR UPDATE`` in an
  open transaction: it serializes a critical section across workers (enqueueing the baseline once,
  asking for the next trial) and is released by commit — or by the server when a killed worker's
  connection drops.

Only server databases need this: SQLite studies take one tuner at a time (tuner/store/storage.py's
lock file).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, IntegrityError

from tuner.core.errors import SpectuneError
from tuner.store.storage import CONNECT_TIMEOUT_S

log = logging.getLogger(__name__)

TABLE = "spectune_leases"
_metadata = sa.MetaData()
_leases = sa.Table(
    TABLE, _metadata,
    sa.Column("study_name", sa.String(512), primary_key=True),
    sa.Column("resource", sa.String(512), primary_key=True),
    sa.Column("holder", sa.String(512), nullable=False),
    sa.Column("expires_at", sa.DateTime(), nullable=False),  # naive UTC, from the database's clock
)
#: Expiry of a mutex row: mutexes are held by row lock, never by expiry.
_NEVER = datetime(1970, 1, 1)


class HostBusy(SpectuneError):
    """Every host the worker may use is leased by a live worker."""

    exit_code = 5


class LeaseLost(SpectuneError):
    """This worker's host lease expired and another worker took the host: it must not deploy there
    again."""

    exit_code = 5


@dataclass(frozen=True)
class Lease:
    resource: str
    holder: str
    expires_at: datetime
    now: datetime  # the database's clock when read

    @property
    def remaining_s(self) -> float:
        return (self.expires_at - self.now).total_seconds()


def new_holder() -> str:
    """Who holds a lease, readable in messages: ``machine:pid:random`` (the random part tells
    restarts apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class LeaseTable:
    """The lease rows of one study. Thread-safe (one SQLAlchemy engine; each call takes its own
    connection)."""

    def __init__(self, url: str, study_name: str) -> None:
        self.study_name = study_name
        # Small pool: the renewing thread, one held mutex and the main thread are all a worker ever
        # uses. A short connect timeout: an unreachable server is reported in seconds, not after
        # TCP's minutes.
        self.engine = sa.create_engine(url, pool_pre_ping=True, pool_size=2, max_overflow=2,
                                       connect_args={"connect_timeout": CONNECT_TIMEOUT_S})
        for attempt in range(3):
            try:
                _metadata.create_all(self.engine, checkfirst=True)
                break
            # workers creating the table at the same moment
            except (IntegrityError, sa.exc.ProgrammingError):
                if attempt == 2:
                    raise
                time.sleep(0.2 + 0.3 * attempt)

    def close(self) -> None:
        self.engine.dispose()

    # ----- leases ---------------------------------------------------------------------------------
    def acquire(self, resource: str, holder: str, ttl_s: float) -> Lease | None:
        """Take ``resource`` for ``ttl_s`` seconds. None when taken; else the live lease that holds
        it."""
        with self.engine.begin() as conn:
            now = _db_now(conn)
            try:
                # a savepoint: a lost INSERT race must not abort the transaction
                with conn.begin_nested():
                    conn.execute(_leases.insert().values(study_name=self.study_name,
                                                         resource=resource, holder=holder,
                                                         expires_at=now + _td(ttl_s)))
                return None
            except IntegrityError:
                pass
            taken = conn.execute(
                _leases.update()
                .where(self._row(resource),
                       sa.or_(_leases.c.expires_at < now, _leases.c.holder == holder))
                .values(holder=holder, expires_at=now + _td(ttl_s))
            ).rowcount
            if taken == 1:
                return None
            row = conn.execute(sa.select(_leases.c.holder,
                                         _leases.c.expires_at).where(self._row(resource))).one()
            return Lease(resource, row.holder, row.expires_at, now)

    def renew(self, resource: str, holder: str, ttl_s: float) -> bool:
        """Extend our lease; False when it is no longer ours (it expired and another worker took
        it)."""
        with self.engine.begin() as conn:
            now = _db_now(conn)
            # No expiry check: a lease that lapsed but that nobody took is still safely ours.
            return bool(conn.execute(
                _leases.update().where(self._row(resource), _leases.c.holder == holder)
                .values(expires_at=now + _td(ttl_s))
            ).rowcount)

    def release(self, resource: str, holder: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(_leases.delete().where(self._row(resource), _leases.c.holder == holder))

    def leases(self, prefix: str = "host:") -> list[Lease]:
        """The live leases whose resource starts with ``prefix`` (for messages and tests)."""
        with self.engine.connect() as conn:
            now = _db_now(conn)
            rows = conn.execute(sa.select(_leases).where(
                _leases.c.study_name == self.study_name, _leases.c.resource.startswith(prefix),
                _leases.c.expires_at >= now)).all()
        return [Lease(r.resource, r.holder, r.expires_at, now) for r in rows]

    # ----- mutexes --------------------------------------------------------------------------------
    def mutex(self, name: str) -> Mutex:
        return Mutex(self, f"mutex:{name}")

    def _row(self, resource: str) -> Any:
        return sa.and_(_leases.c.study_name == self.study_name, _leases.c.resource == resource)

    def _ensure_row(self, resource: str) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(_leases.insert().values(study_name=self.study_name, resource=resource,
                                                     holder="", expires_at=_NEVER))
        except IntegrityError:
            pass  # it exists (perhaps made by another worker just now): all we need


class Mutex:
    """A study-wide lock held as a row lock in an open transaction. ``acquire`` blocks; ``release``
    is idempotent, so a caller may release early (e.g. as soon as the next trial is proposed) and
    again in a ``finally``."""

    def __init__(self, table: LeaseTable, resource: str) -> None:
        self.table = table
        self.resource = resource
        self._conn: sa.Connection | None = None

    def acquire(self) -> None:
        self.table._ensure_row(self.resource)
        conn = self.table.engine.connect()
        try:
            conn.begin()
            conn.execute(
                sa.select(_leases.c.resource).where(self.table._row(self.resource)).with_for_update(
                    ))
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.commit()
        except DBAPIError as exc:  # the lock goes with the connection either way
            log.warning("releasing %s: %s", self.resource, exc)
        finally:
            conn.close()

    @contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()


class LeaseKeeper:
    """Holds one lease: renews it every ``interval_s`` in a daemon thread, and checks it before each
    deploy.

    ``confirm`` renews synchronously and raises ``LeaseLost`` when the lease was taken over, so a
    worker that was frozen past its grace period cannot deploy onto a host that another worker now
    uses."""

    def __init__(self, table: LeaseTable, resource: str, holder: str, *, interval_s: float,
                 ttl_s: float) -> None:
        self.table = table
        self.resource = resource
        self.holder = holder
        self.interval_s = interval_s
        self.ttl_s = ttl_s
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease {resource}", daemon=True)

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                if not self.table.renew(self.resource, self.holder, self.ttl_s):
                    self._lost.set()
                    return
            # the database may come back before the lease expires: keep trying
            except DBAPIError as exc:
                log.warning("renewing the lease on %s: %s", self.resource, exc)

    def confirm(self) -> None:
        if self._lost.is_set() or not self.table.renew(self.resource, self.holder, self.ttl_s):
            self._lost.set()
            raise LeaseLost(
                f"the lease on {self.resource.removeprefix('host:')} expired and another worker "
                "took the host; this worker stops (its trial is re-run by the others)")

    def stop(self, *, release: bool = True) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if release and not self._lost.is_set():
            try:
                self.table.release(self.resource, self.holder)
            except DBAPIError as exc:  # it expires on its own
                log.warning("releasing the lease on %s: %s", self.resource, exc)


def _db_now(conn: sa.Connection) -> datetime:
    """The database server's current time as naive UTC (every expiry is compared on this clock)."""
    value = conn.execute(sa.select(sa.func.current_timestamp())).scalar_one()
    if isinstance(value, str):  # SQLite answers text
        value = datetime.fromisoformat(value)
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def _td(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)
