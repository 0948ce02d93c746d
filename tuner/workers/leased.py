"""A target that may only be changed while this worker holds the host's lease
(tuner/workers/leases.py).

Every call that changes what runs on the host first renews the lease synchronously; a worker whose
lease was taken over (it was frozen past the grace period and another worker now uses the host) gets
``LeaseLost`` instead of deploying over the other worker's server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy.exc import DBAPIError

from tuner.sglang.launch import ServerConfig
from tuner.sglang.options import OptionTable
from tuner.targets.base import Deployment, DeployPlan, Target
from tuner.workers.leases import LeaseKeeper


class LeasedTarget(Target):
    def __init__(self, inner: Target, keeper: LeaseKeeper) -> None:
        self.inner = inner
        self.keeper = keeper
        self.kind = inner.kind
        self.time_scale = inner.time_scale

    def preflight(self, flags: Iterable[str]) -> None:
        self.inner.preflight(flags)
        self.carried, self.notes = self.inner.carried, self.inner.notes

    def deploy(self, config: ServerConfig) -> Deployment:
        self.keeper.confirm()
        return self.inner.deploy(config)

    def restore(self) -> None:
        # The database down (the study is ending with exit 4): no other worker can lease the host
        # without it, so what this worker started is still its own to stop — a storage failure must
        # not leave the server running.
        with contextlib.suppress(DBAPIError):
            self.keeper.confirm()
        self.inner.restore()

    def log_tail(self, lines: int = 50) -> str:
        return self.inner.log_tail(lines)

    @property
    def log_location(self) -> str | None:
        return self.inner.log_location

    def plan(self, config: ServerConfig) -> DeployPlan:
        return self.inner.plan(config)

    def check_access(self) -> tuple[str, ...]:
        return self.inner.check_access()  # contacts the host, changes nothing: no lease needed

    def detect_leftover(self) -> str | None:
        return self.inner.detect_leftover()

    def installed_sglang(self) -> str | None:
        return self.inner.installed_sglang()

    def sglang_table(self,
                     cached: Callable[[str, str],
                                      OptionTable | None] | None = None) -> OptionTable | None:
        return self.inner.sglang_table(cached)

    def sglang_build(self) -> str | None:
        return self.inner.sglang_build()

    def use_table(self, table: OptionTable) -> None:
        self.inner.use_table(table)

    def resolve(self, config: ServerConfig) -> dict[str, Any] | None:
        return self.inner.resolve(config)  # changes nothing on the host: no lease needed

    def close(self) -> None:
        self.inner.close()
