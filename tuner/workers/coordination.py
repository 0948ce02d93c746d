"""What several workers on one study share besides Optuna's tables: a host each, and study-wide
locks.

``shared_study`` leases a host for this worker (waiting up to one grace period, so a host whose
worker just died is reclaimed), keeps the lease renewed while the worker runs, and hands out the two
study-wide mutexes: ``ask`` (tuner/run/loop.py) and ``baseline`` (the baseline is enqueued once per
study, not once per worker).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tuner.store.storage import OPEN_RETRIES, with_storage_retries
from tuner.study.hosts import hosts_of
from tuner.study.spec import StudySpec
from tuner.workers.leases import HostBusy, Lease, LeaseKeeper, LeaseTable, Mutex, new_holder


@dataclass(frozen=True)
class Coordination:
    host: str
    holder: str
    keeper: LeaseKeeper
    ask: Mutex
    baseline: Mutex


@contextmanager
def shared_study(spec: StudySpec, host: str | None, *, say: Callable[[str], None],
                 wait_s: float | None = None, poll_s: float = 1.0) -> Iterator[Coordination]:
    """Lease ``host`` (or the first free host of the study) for this worker; release it on the way
    out."""
    settings = spec.study
    table = with_storage_retries(lambda: LeaseTable(settings.storage, settings.name),
                                 "opening the lease table",
                                 settings.storage, retries=OPEN_RETRIES, say=say)
    holder = new_holder()
    try:
        # A dead worker's lease lapses within one grace period of its last renewal: wait that long,
        # not forever (a live worker on the host would be a configuration mistake worth an error).
        chosen = _lease_a_host(table, holder, (host,) if host else hosts_of(spec),
                               ttl_s=settings.heartbeat_grace_s,
                               wait_s=settings.heartbeat_grace_s + settings.heartbeat_interval_s
                               if wait_s is None else wait_s, poll_s=poll_s, say=say)
        keeper = LeaseKeeper(table, f"host:{chosen}", holder,
                             interval_s=settings.heartbeat_interval_s,
                             ttl_s=settings.heartbeat_grace_s).start()
        try:
            yield Coordination(chosen, holder, keeper, table.mutex("ask"), table.mutex("baseline"))
        finally:
            keeper.stop()
    finally:
        table.close()


def _lease_a_host(table: LeaseTable, holder: str, candidates: tuple[str, ...], *, ttl_s: float,
                  wait_s: float, poll_s: float, say: Callable[[str], None]) -> str:
    deadline = time.monotonic() + wait_s
    announced = False
    while True:
        held: list[Lease] = []
        for host in candidates:
            lease = table.acquire(f"host:{host}", holder, ttl_s)
            if lease is None:
                return host
            held.append(lease)
        busy = ", ".join(f"{lease.resource.removeprefix('host:')} (worker {lease.holder}, "
                         f"{max(lease.remaining_s, 0):.0f} s left)" for lease in held)
        if time.monotonic() >= deadline:
            raise HostBusy(f"{'host' if len(candidates) == 1 else 'every host'} of study "
                           f"{table.study_name!r} is leased by a live worker: {busy}; one worker "
                           "per host")
        if not announced:
            say(f"waiting for a host lease: {busy}")
            announced = True
        time.sleep(poll_s)
