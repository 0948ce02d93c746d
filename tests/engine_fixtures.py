"""Fixtures the engine's unit tests share (tests/unit/{store,search,run,evaluation}/conftest.py
import them)."""

from __future__ import annotations

import pytest

from tests.study_factory import _oracle_template, stored_study  # noqa: F401 - fixtures, re-exported
from tuner.search import baseline


@pytest.fixture(autouse=True)
def _no_designed_start(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trial-mechanics tests queue their own points right after the baseline; the designed start
    (tuner/search/baseline.py) is tested on its own, in test_search_start.py."""
    if "designed_start" not in request.keywords:
        monkeypatch.setattr(baseline, "DESIGNED_SHAPES", ())
        # ... and so are the branch starts and SGLang's own choices (tuner/search/references.py,
        # tested in test_references.py)
        monkeypatch.setattr(baseline, "comparison_points", lambda *_, **__: [])
