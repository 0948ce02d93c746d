"""A throw-away PostgreSQL server for tests: initdb + pg_ctl from the system's binaries in a temp
dir.

Listens on 127.0.0.1 on a free port with trust authentication (or, given a password, SCRAM password
authentication: a wrong password is refused), its socket in the temp dir. initdb refuses to
run as root, so as root (CI containers) the server runs as the ``postgres`` user (or ``nobody``) via
runuser. Missing binaries skip locally and fail under CI=true (tests.helpers.require_binary).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers import require_binary
from tuner.core.net import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")
USER = "spectune"



def _run_as() -> list[str]:
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return [shutil.which("runuser") or "/usr/sbin/runuser", "-u", name, "--"]
    raise RuntimeError("running as root and no unprivileged user to run PostgreSQL as")


_servers: dict[str, list[str]] = {}


def pg_stop(url: str) -> None:
    """Stop the server of ``url`` at once (connections are cut, as in a crash or a failover)."""
    subprocess.run([*_servers[url], "-m", "immediate", "stop"], capture_output=True, timeout=90,
                   check=True)


def pg_start(url: str) -> None:
    subprocess.run([*_servers[url], "start"], capture_output=True, timeout=90, check=True)


@contextmanager
def postgres_server(password: str | None = None) -> Iterator[str]:
    """Yield a SQLAlchemy URL (psycopg 3 driver) of a fresh server; stop it and delete its files
    after. With ``password`` the server asks for it (the URL carries it)."""
    initdb = require_binary("initdb", str(PG_BIN / "initdb"))
    pg_ctl = require_binary("pg_ctl", str(PG_BIN / "pg_ctl"))
    prefix = _run_as()
    # Directly under /tmp, not pytest's tmp_path: that sits below root-only directories the server's
    # unprivileged user could not enter.
    base = Path(tempfile.mkdtemp(prefix="spectune-pg-"))
    data, log = base / "data", base / "server.log"
    if prefix:
        owner = pwd.getpwnam(prefix[2])
        os.chown(base, owner.pw_uid, owner.pw_gid)
        base.chmod(0o700)
    auth = ["-A", "trust"]
    if password is not None:
        pwfile = base / "pwfile"
        pwfile.write_text(password + "\n")
        if prefix:
            os.chown(pwfile, owner.pw_uid, owner.pw_gid)
        auth = ["-A", "scram-sha-256", "--pwfile", str(pwfile)]
    made = subprocess.run([*prefix, initdb, "-D", str(data), "-U", USER, *auth, "--no-sync", "-E",
                           "UTF8"],
                          capture_output=True, text=True, timeout=120)
    if made.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {made.stderr.strip()}")
    port = free_port()
    options = f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off -c full_page_writes=off"
    started = subprocess.run([*prefix, pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w",
                              "-t", "60", "start"], capture_output=True, text=True, timeout=90)
    if started.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        raise RuntimeError(
            f"pg_ctl start failed: {started.stderr}\n{log.read_text() if log.exists() else ''}")
    credentials = USER if password is None else f"{USER}:{password}"
    url = f"postgresql+psycopg://{credentials}@127.0.0.1:{port}/postgres"
    # What pg_stop/pg_start need to take this server down and bring it back (the fault suite's
    # outages).
    _servers[url] = ([*prefix, pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w", "-t",
                      "60"])
    try:
        yield url
    finally:
        _servers.pop(url, None)
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)
