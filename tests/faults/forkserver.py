"""A fork server for the signal matrix: ``spectune`` as its own process, without paying its imports
per case.

``spectune tune`` spends seconds importing (optuna, SQLAlchemy, SciPy) before it does anything; the
matrix runs it dozens of times. This program imports the command line once, then for each request
forks a child that *is* the command: its own pid, signals and exit status, stdin from /dev/null,
stdout and stderr to files, the environment given, ``sys.exit`` through the interpreter's ordinary
exit (atexit, thread joins — a command that hangs on its way out still hangs). Only what ran at
import is shared, and nothing that ran then started a thread or opened a connection. It runs as root
would without the right to ignore file permissions (``_as_a_user``), so that the storage faults can
make a directory read-only.

Protocol: one JSON object a line on stdin, one answer a line on stdout —
``{"run": [args], "env": {...}, "cwd": ..., "out": path, "err": path}`` → ``{"pid": n}``;
``{"wait": pid, "deadline": s}`` → ``{"code": c}`` (as ``subprocess``: negative for a signal; null
when the command had not ended by the deadline — a hang — and was SIGKILLed). EOF ends the server.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.helpers import REPO

PR_CAPBSET_DROP = 24  # <linux/prctl.h>
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2  # <linux/capability.h>


def _serve() -> None:
    # What `spectune tune` imports on its way to the first trial.
    import tuner.app.summary
    import tuner.app.tune
    import tuner.run.measure
    import tuner.study.load
    import tuner.study.target  # noqa: F401
    from tuner.cli import main

    _warm_storage()
    for line in sys.stdin:
        request = json.loads(line)
        if "wait" in request:
            _answer({"code": _wait(request["wait"], request["deadline"])})
            continue
        sys.stdout.flush()
        # The imported modules out of the collector's sight: a child that ends does not spend
        # seconds walking them once more on its way out (nor copy their pages by touching their
        # headers).
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            _become(request)
            # click's standalone mode: always SystemExit
            main(args=request["run"], prog_name="spectune")
            raise AssertionError("unreachable")
        _answer({"pid": pid})


def _warm_storage() -> None:
    """Optuna imports Alembic and compiles its SQL on the first storage it opens: do that here,
    once, and leave no connection open for the children to share."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as `spectune tune` sets it
    with tempfile.TemporaryDirectory() as folder:
        storage = optuna.storages.RDBStorage(f"sqlite:///{folder}/warm.db")
        optuna.create_study(storage=storage, study_name="warm").ask()
        storage.scoped_session.remove()
        storage.engine.dispose()


def _wait(pid: int, deadline_s: float) -> int | None:
    """The child's exit status; None (and the child SIGKILLed) when it has not ended within
    ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def _become(request: dict[str, Any]) -> None:
    """In the child: the command's own stdio, directory and environment, its fault points read
    afresh."""
    from tuner.core import faults

    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the child's for good
    os.chdir(request["cwd"])
    # A command started from a terminal gets SIGHUP's default action; a test run started under nohup
    # would hand its children SIG_IGN, which spectune honours (it stays ignored), and the SIGHUP
    # tests would measure nohup instead of the tuner.
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(request["env"])
    faults.reload()


def _answer(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _as_a_user() -> None:
    """Root without the capabilities that let it ignore file permissions (CI runs as root): a
    directory made read-only is then read-only to the tuner, as it is to any user's. Dropped from
    the bounding set before the exec, so the server and everything it forks start without them;
    nothing to drop for a user."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


class ForkServer:
    """The client: ``start`` a command, ``wait`` for its exit status."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-u", "-m", "tests.faults.forkserver"],
                                     cwd=REPO,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     preexec_fn=_as_a_user)

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, "the fork server died"
        result: dict[str, Any] = json.loads(answer)
        return result

    def start(self, args: list[str], *, env: dict[str, str], cwd: Path, out: Path,
              err: Path) -> int:
        return int(self._ask({"run": args, "env": env, "cwd": str(cwd), "out": str(out),
                              "err": str(err)})["pid"])

    def wait(self, pid: int, deadline_s: float) -> int | None:
        code = self._ask({"wait": pid, "deadline": deadline_s})["code"]
        return None if code is None else int(code)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


if __name__ == "__main__":
    _serve()
