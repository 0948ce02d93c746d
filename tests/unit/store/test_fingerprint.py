"""A study file that changed since its study began is noticed: tune refuses, queries warn."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tuner.query.load import open_stored_study
from tuner.store.fingerprint import (
    FINGERPRINT_ATTR,
    StudyFileChanged,
    changed_sections,
    record_or_check,
    section_fingerprints,
)
from tuner.study.load import load_study_file


def test_comments_and_other_sections_do_not_count(stored_study: Path) -> None:
    before = section_fingerprints(load_study_file(stored_study))
    text = stored_study.read_text()
    stored_study.write_text("# a new comment\n" + text.replace("n_trials = 12", "n_trials = 40")
                            .replace("time_scale = 50.0", "time_scale = 10.0"))
    assert section_fingerprints(load_study_file(stored_study)) == before


@pytest.mark.parametrize(("edit", "section"), [
    (("max_tokens = 256", "max_tokens = 128"), "benchmark"),
    (("weights = { c1 = 0.5, c64 = 0.5 }", "weights = { c1 = 0.7, c64 = 0.3 }"), "objective"),
    (("speculative-num-steps = { min = 1, max = 6 }",
      "speculative-num-steps = { min = 1, max = 8 }"), "search"),
])
def test_each_section_change_is_named(stored_study: Path, edit: tuple[str, str],
                                      section: str) -> None:
    stored_study.write_text(stored_study.read_text().replace(*edit))
    stored = open_stored_study(stored_study)
    assert changed_sections(stored.study, stored.spec) == [section]
    assert stored.warnings \
           and f"[{section}] has changed since study 'demo' began" in stored.warnings[0]
    if section == "objective":  # re-ranking stored metrics is free: resuming is allowed, and said
        note = record_or_check(stored.study, stored.spec)
        assert note is not None and "re-ranked under the new objective" in note
        # recorded: the next resume is silent
        assert changed_sections(stored.study, stored.spec) == []
        return
    with pytest.raises(StudyFileChanged, match=rf"\[{section}\] has changed") as info:
        record_or_check(stored.study, stored.spec)
    assert info.value.exit_code == 2


def test_unchanged_file_passes_and_old_studies_get_a_fingerprint(stored_study: Path) -> None:
    stored = open_stored_study(stored_study)
    assert stored.warnings == ()
    record_or_check(stored.study, stored.spec)  # unchanged: no error
    study = optuna.create_study()  # a study from before fingerprints existed
    assert changed_sections(study, stored.spec) is None
    record_or_check(study, stored.spec)
    assert study.user_attrs[FINGERPRINT_ATTR] == section_fingerprints(stored.spec)
