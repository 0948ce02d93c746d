"""`spectune tune` on a real PostgreSQL that asks for a password, the password taken from the
environment (``storage = "postgresql+psycopg://user:${NAME}@host/db"``): the study runs and is
stored there, and the password appears in nothing the tuner prints — neither when it works nor when
the server refuses it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_tune import make_study
from tests.helpers import spectune_command
from tests.postgres import postgres_server

PASSWORD = "pw-Secret-7319"
VARIABLE = "SPECTUNE_TEST_PG_PASSWORD"


@pytest.fixture(scope="module")
def password_server() -> Iterator[str]:
    with postgres_server(password=PASSWORD) as url:
        yield url


def _study(tmp_path: Path, url: str) -> Path:
    path = make_study(tmp_path, f"secret-{os.getpid()}", n_trials=2)
    storage = url.replace(f":{PASSWORD}@", f":${{{VARIABLE}}}@")
    assert storage != url
    path.write_text(path.read_text().replace("[study]\n", f'[study]\nstorage = "{storage}"\n', 1))
    return path


def _run(study: Path, password: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{VARIABLE: password})
    return subprocess.run([*spectune_command(), *args, str(study)], capture_output=True, text=True,
                          env=env, cwd=study.parent, timeout=300)


def test_tune_stores_the_study_on_a_password_server_and_never_prints_the_password(
        tmp_path: Path, password_server: str) -> None:
    study = _study(tmp_path, password_server)
    tuned = _run(study, PASSWORD, "tune", "--confirm", "0")
    assert tuned.returncode == 0, tuned.stderr
    assert PASSWORD not in tuned.stdout + tuned.stderr
    assert re.search(r"database: postgresql\+psycopg://spectune:\*\*\*@127\.0\.0\.1:\d+/postgres",
                     tuned.stdout)
    listed = _run(study, PASSWORD, "trials", "--json")
    assert listed.returncode == 0, listed.stderr
    assert PASSWORD not in listed.stdout + listed.stderr
    # Both trials are in the server's database, measured (the designed start's queued ones wait
    # beside them).
    measured = [t for t in json.loads(listed.stdout)["trials"] if t["status"] == "ok"]
    assert len(measured) == 2 \
           and all(t["score"] is not None and t["c64_tok_s"] > 0 for t in measured), measured


def test_a_refused_password_is_one_line_that_does_not_print_it(tmp_path: Path,
                                                               password_server: str) -> None:
    study = _study(tmp_path, password_server)
    wrong = "pw-Wrong-4471"
    refused = _run(study, wrong, "tune", "--confirm", "0")
    assert refused.returncode == 4  # the storage's exit code (docs/study.md)
    assert wrong not in refused.stdout + refused.stderr \
           and PASSWORD not in refused.stdout + refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "password authentication failed" in errors[0], refused.stderr
    # A refused password is not an outage: no retries, no traceback.
    assert "trying again" not in refused.stderr and "Traceback" not in refused.stderr
