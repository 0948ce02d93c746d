"""Host leases and mutexes on a real PostgreSQL: one winner under contention, expiry, take-over, no
deploys after a lease is lost."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest

from tuner.workers.leases import LeaseKeeper, LeaseLost, LeaseTable


def fresh_table(url: str) -> LeaseTable:
    return LeaseTable(url, f"study-{uuid.uuid4().hex[:8]}")


def all_at_once(workers: int, attempt: Callable[[str], bool]) -> list[str]:
    """Run ``attempt(holder)`` in ``workers`` threads released together; the holders for which it
    succeeded."""
    barrier = threading.Barrier(workers)
    winners: list[str] = []

    def run(holder: str) -> None:
        barrier.wait()
        if attempt(holder):
            winners.append(holder)

    threads = [threading.Thread(target=run, args=(f"w{i}",)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return winners


def test_exactly_one_of_many_concurrent_workers_wins_a_host(pg_url: str) -> None:
    table = fresh_table(pg_url)

    def contend(holder: str) -> bool:
        # one engine per worker, as separate processes have
        mine = LeaseTable(pg_url, table.study_name)
        try:
            return mine.acquire("host:gpu1", holder, ttl_s=30) is None
        finally:
            mine.close()

    winners = all_at_once(12, contend)
    assert len(winners) == 1
    [lease] = table.leases()
    assert lease.holder == winners[0] and lease.remaining_s > 20


def test_an_expired_lease_is_taken_over_by_exactly_one_worker(pg_url: str) -> None:
    table = fresh_table(pg_url)
    assert table.acquire("host:gpu1", "dead", ttl_s=1) is None
    held = table.acquire("host:gpu1", "other", ttl_s=30)
    assert held is not None and held.holder == "dead"  # still live: refused, and told who holds it
    time.sleep(1.2)
    winners = all_at_once(8, lambda holder: table.acquire("host:gpu1", holder, ttl_s=30) is None)
    assert len(winners) == 1
    assert not table.renew("host:gpu1", "dead", 30)  # the dead worker's lease is gone for good


def test_a_worker_whose_lease_was_taken_cannot_deploy(pg_url: str) -> None:
    table = fresh_table(pg_url)
    assert table.acquire("host:gpu1", "slow", ttl_s=1) is None
    keeper = LeaseKeeper(table, "host:gpu1", "slow", interval_s=60, ttl_s=1)  # never renews in time
    keeper.confirm()  # still ours
    time.sleep(1.2)
    assert table.acquire("host:gpu1", "fast", ttl_s=30) is None
    with pytest.raises(LeaseLost, match="another worker took the host"):
        keeper.confirm()
    keeper.stop()
    # stopping the loser released nothing
    assert [lease.holder for lease in table.leases()] == ["fast"]


def test_the_keeper_renews_and_releases(pg_url: str) -> None:
    table = fresh_table(pg_url)
    assert table.acquire("host:a", "me", ttl_s=2) is None
    keeper = LeaseKeeper(table, "host:a", "me", interval_s=0.3, ttl_s=2).start()
    time.sleep(2.5)  # longer than the TTL: only renewal keeps it
    assert table.acquire("host:a", "intruder", ttl_s=2) is not None
    keeper.stop()
    assert table.leases() == []
    assert table.acquire("host:a", "next", ttl_s=2) is None


def test_mutex_serializes_critical_sections(pg_url: str) -> None:
    table = fresh_table(pg_url)
    inside = 0
    overlaps: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        nonlocal inside
        mine = LeaseTable(pg_url, table.study_name)
        for _ in range(5):
            with mine.mutex("ask").held():
                with lock:
                    inside += 1
                    overlaps.append(inside)
                time.sleep(0.01)
                with lock:
                    inside -= 1
        mine.close()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(overlaps) == 20 and max(overlaps) == 1
