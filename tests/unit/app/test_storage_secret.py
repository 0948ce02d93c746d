"""A storage URL whose password comes from the environment (``${NAME}``) is used as such and never
printed: the "database:" line at the end of ``tune`` shows it as ``***``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import STUDIES
from tuner.app.summary import Locations, summary_lines
from tuner.study.load import load_study_file


def test_the_database_line_masks_a_password_read_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECTUNE_TEST_PW", "s3cret-pw")
    study = tmp_path / "s.toml"
    study.write_text((STUDIES / "simulated.toml").read_text().replace(
        "n_trials = 12",
        'n_trials = 12\nstorage = "postgresql+psycopg://tuner:${SPECTUNE_TEST_PW}@db.example/s"'))
    spec = load_study_file(study)
    # what the driver gets
    assert spec.study.storage == "postgresql+psycopg://tuner:s3cret-pw@db.example/s"
    text = "\n".join(summary_lines(spec, None, None, Locations(spec.study.storage, None)))
    assert "database: postgresql+psycopg://tuner:***@db.example/s" in text
    assert "s3cret" not in text
