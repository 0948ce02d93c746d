"""Which hosts a study's target covers, and the one-host view of a study that a worker deploys to.

A *host* is one machine a worker may lease (tuner/workers/leases.py) and deploy to:
- ``systemd-ssh``: an SSH host name — ``[target] hosts = [...]``, or the one ``host``;
- ``simulated``: a label; each one gets its own simulator process on its own free 127.0.0.1 port and its own
  log directory (``<log_dir>/<host>``), as separate GPU boxes would;
- ``local``: this machine (its hostname); a study on several machines runs one worker on each.
"""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

from tuner.core.errors import UsageError
from tuner.study.spec import StudySpec

#: The host name of a simulated target without a ``hosts`` list.
DEFAULT_SIMULATED_HOST = "simulated"


def hosts_of(spec: StudySpec) -> tuple[str, ...]:
    if spec.target.hosts:
        return spec.target.hosts
    if spec.target.kind == "systemd-ssh":
        return (str(spec.target.settings["host"]),)
    if spec.target.kind == "simulated":
        return (DEFAULT_SIMULATED_HOST,)
    return (socket.gethostname(),)


def check_host(spec: StudySpec, host: str) -> str:
    """``host`` when the study's target covers it, else a one-line error naming the ones it does."""
    known = hosts_of(spec)
    if host not in known:
        raise UsageError(f"--host {host!r} is not a host of study {spec.study.name!r} "
                         f"([target] hosts: {', '.join(known)})")
    return host


def spec_for_host(spec: StudySpec, host: str) -> StudySpec:
    """The study as seen by the worker on ``host``: the target's settings point at that host only."""
    if not spec.target.hosts:
        return spec
    settings = dict(spec.target.settings)
    if spec.target.kind == "systemd-ssh":
        settings["host"] = host
    elif spec.target.kind == "simulated":
        # Per-host logs and pid file: a worker cleaning up a dead worker's leftover server must find that
        # host's server, never another host's.
        base = Path(settings.get("log_dir") or Path(".spectune") / spec.study.name / "logs")
        settings["log_dir"] = str(base / host)
    target = dataclasses.replace(spec.target, settings=settings, hosts=(host,))
    return dataclasses.replace(spec, target=target)
