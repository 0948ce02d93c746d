"""Processes of a local server: finding the ones a study started (by the marker in their
environment), stopping a whole process group, and reading the end of a log file.

SGLang forks scheduler and detokenizer processes, so a server is stopped as its process group; a
server left by an interrupted run is recognised by ``SPECTUNE_STUDY`` (and ``SPECTUNE_TARGET``) in
its environment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

STUDY_ENV = "SPECTUNE_STUDY"
#: Which target (its log directory) a server belongs to: several simulated hosts of one study share
#: a machine, and one worker's scan for leftovers must never stop another worker's server.
TARGET_ENV = "SPECTUNE_TARGET"


def marked_processes(study: str, pids: Iterable[int] | None = None, *,
                     target: str | None = None) -> list[int]:
    """Live processes (of ``pids``, default all) whose environment carries this study's
    ``SPECTUNE_STUDY`` (and ``target``'s ``SPECTUNE_TARGET``, when given)."""
    marker = f"{STUDY_ENV}={study}".encode()
    target_marker = f"{TARGET_ENV}={target}".encode() if target is not None else None
    if pids is None:
        try:
            pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
        except OSError:
            return []
    found = []
    for pid in pids:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # gone (or not ours to read)
        if marker in environ and state != "Z" \
                and (target_marker is None or target_marker in environ):
            found.append(pid)
    return found


def group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
def stop_group(pgid: int, grace_s: float, proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM the process group, SIGKILL what is left after ``grace_s``; returns once the group is
    gone."""
    if not _signal_group(pgid, signal.SIGTERM):
        _reap(proc)
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(proc)
        if not _group_alive(pgid):
            return
        time.sleep(0.02)
    _signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and (_reap(proc) or _group_alive(pgid)):
        time.sleep(0.02)


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def _group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in the group. A zombie leader that is not our
    child (a leftover's) cannot be reaped by us, and would make ``killpg(pgid, 0)`` succeed
    forever."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[2] == str(pgid) and fields[0] != "Z":  # state, ppid, pgrp, ...
            return True
    return False


def _reap(proc: subprocess.Popen[bytes] | None) -> bool:
    """Collect the leader's exit status (a zombie still counts as a group member); True while it
    runs."""
    return proc is not None and proc.poll() is None


def tail_file(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a (possibly large) log file, read from the end."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        block = min(size, max(65536, lines * 400))
        f.seek(size - block)
        data = f.read()
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])
