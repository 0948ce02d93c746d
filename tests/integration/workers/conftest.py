"""One throw-away PostgreSQL server for the worker tests (tests/postgres.py); each test uses its own
study name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import postgres_server


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url
