"""Which hosts a study's target covers, and the one-host view of a study that a worker deploys to.

A *host* is one machine a worker may lease (tuner/workers/leases.py) and deploy to:
- ``systemd-ssh``: an SSH host name — ``[target] hosts = [...]``, or the one ``host``;
- ``simulated``: a label; each one gets its own simulator process on its own free 127.0.0.1 port and
  its own log directory (``<log_dir>/<host>``), as separate GPU boxes would;
- ``local``: this machine (its hostname); a study on several machines runs one worker on each.
"""

from __future__ import annotations

import dataclasses
import socket

from tuner.core.errors import UsageError
from tuner.study.spec import StudySpec
from tuner.targets.simulated import DEFAULT_SIMULATED_HOST

__all__ = ["DEFAULT_SIMULATED_HOST", "check_host", "hosts_of", "spec_for_host"]


def hosts_of(spec: StudySpec) -> tuple[str, ...]:
    # A kind without hosts of its own (local) is this machine.
    return spec.target.settings.covered_hosts(spec.study.name) or (socket.gethostname(),)


def check_host(spec: StudySpec, host: str) -> str:
    """``host`` when the study's target covers it, else a one-line error naming the ones it does."""
    known = hosts_of(spec)
    if host not in known:
        raise UsageError(f"--host {host!r} is not a host of study {spec.study.name!r} "
                         f"([target] hosts: {', '.join(known)})")
    return host


def spec_for_host(spec: StudySpec, host: str) -> StudySpec:
    """The study as seen by the worker on ``host``: the target's settings point at that host
    only."""
    if not spec.target.hosts:
        return spec
    target = dataclasses.replace(spec.target,
                                 settings=spec.target.settings.for_host(host, spec.study.name))
    return dataclasses.replace(spec, target=target)
