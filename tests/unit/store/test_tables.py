"""The option tables a target's SGLang supplied, cached in the study's storage per version and
build."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna

from tuner.sglang.options import OptionTable, load_option_table
from tuner.store.keys import StudyKey
from tuner.store.tables import cached_table, cached_tables, store_table


def _study(tmp_path: Path) -> optuna.Study:
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="tables")


def test_a_stored_table_is_found_by_another_worker_of_the_same_storage(tmp_path: Path) -> None:
    table = load_option_table("0.5.20")
    store_table(_study(tmp_path), table, build="abc123")
    other = optuna.load_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="tables")
    found = cached_table(other, "0.5.20", "abc123")
    assert found is not None and found.to_json() == table.to_json()
    assert cached_table(other, "0.5.20", "other-build") is None
    assert cached_table(other, "0.5.22", "abc123") is None
    # Small enough for any storage's attribute column.
    assert len(other.user_attrs[StudyKey.sglang_table("0.5.20", "abc123")]) < 20_000


def test_builds_of_one_version_are_kept_apart() -> None:
    study = optuna.create_study()
    base = load_option_table("0.5.23")
    patched = OptionTable("0.5.23", [*base.options[:-1],
                                     dataclasses.replace(base.options[-1], default="'x'")])
    store_table(study, base)  # default build: the table's fingerprint
    store_table(study, patched)
    assert cached_table(study,
                        "0.5.23",
                        base.fingerprint).fingerprint == base.fingerprint  # type: ignore[union-attr]
    assert cached_table(study,
                        "0.5.23",
                        patched.fingerprint).fingerprint == patched.fingerprint  # type: ignore[union-attr]
    assert sorted(t.fingerprint
                  for t in cached_tables(study)) == sorted([base.fingerprint, patched.fingerprint])


def test_an_unreadable_entry_is_read_again_not_trusted() -> None:
    study = optuna.create_study()
    study.set_user_attr(StudyKey.sglang_table("0.5.23", "b"), "not base64 zlib json")
    assert cached_table(study, "0.5.23", "b") is None
    assert cached_tables(study) == []
