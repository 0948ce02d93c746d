"""The output check's statistic, noise floor and threshold (tuner/run/outputs.py), and the [check]
keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from objectives.probe import ProbeOutput
from tests.helpers import STUDIES
from tuner.run.outputs import (
    FLOOR_SHARE,
    Reference,
    agreement,
    common_prefix,
    judge,
    make_reference,
)
from tuner.study.load import StudyFileError, load_study_file

REF = tuple(ProbeOutput(f"prompt {i}", f" the model answers question {i} with care and detail")
            for i in range(4))


def test_common_prefix_counts_characters_until_the_first_difference() -> None:
    assert common_prefix("abcdef", "abcxef") == 3
    assert common_prefix("abc", "abc") == 3 and common_prefix("abc", "abcd") == 3 \
           and common_prefix("", "x") == 0


def test_identical_outputs_agree_fully_and_early_divergence_fails_with_an_example() -> None:
    reference = make_reference(0, REF, REF)
    assert reference is not None and reference.floor == 1.0 and reference.threshold == FLOOR_SHARE
    assert judge(reference, REF).passed
    wrong = tuple(ProbeOutput(o.prompt, " the model says something else entirely here, twice")
                  for o in REF)
    verdict = judge(reference, wrong)
    assert not verdict.passed and verdict.record["result"] == "wrong-output"
    example = verdict.record["example"]
    assert example["position"] == len(" the model ") and example["reference"].startswith("answers")
    assert example["output"].startswith("says") and "differ" in verdict.message


def test_the_threshold_follows_the_noise_floor() -> None:
    # A reference whose own batch-shape rerun already departs halfway: late divergence is noise, not
    # a fault.
    half = tuple(ProbeOutput(o.prompt, o.text[: len(o.text) // 2] + "#" * (len(o.text) // 2 + 1))
                 for o in REF)
    reference = make_reference(0, REF, half)
    assert reference is not None and 0.4 < reference.floor < 0.6
    late = tuple(ProbeOutput(o.prompt, o.text[: int(len(o.text) * 0.4)] + "~" * 40) for o in REF)
    assert judge(reference, late).passed  # 0.4 ≥ 0.5 × floor
    # the same outputs fail a deterministic floor
    assert not judge(Reference(0, REF, 1.0, 1.0), late).passed


def test_unanswered_prompts_are_not_a_verdict() -> None:
    reference = Reference(0, REF, 1.0, 1.0)
    failed = tuple(ProbeOutput(o.prompt, None, error="HTTP 500") for o in REF)
    verdict = judge(reference, failed)
    assert verdict.passed and verdict.record["result"] == "unchecked" \
           and verdict.record["probe_failed"] == 4
    assert agreement(REF, failed) is None
    assert make_reference(0, failed, REF) is None


def test_a_study_turns_the_check_off_only_with_a_reason(tmp_path: Path) -> None:
    text = (STUDIES / "simulated.toml").read_text()
    path = tmp_path / "s.toml"
    path.write_text(text + "\n[check]\noutputs = false\n")
    with pytest.raises(StudyFileError, match=r"check\.reason"):
        load_study_file(path)
    path.write_text(text + '\n[check]\noutputs = false\nreason = "sampling-only service, outputs '
                           'compared offline"\n')
    spec = load_study_file(path)
    assert not spec.check.outputs \
           and spec.check.reason == "sampling-only service, outputs compared offline"
    assert load_study_file(STUDIES / "simulated.toml").check.outputs
