"""Branch starts and SGLang's own choices queued beside the tuning (tuner/search/references.py)."""

from __future__ import annotations

from dataclasses import replace

from tests.helpers import STUDIES
from tuner.search.references import comparison_points
from tuner.sglang.options import load_option_table
from tuner.store.keys import Key
from tuner.study import branches
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace


def test_one_start_per_other_branch_and_the_adaptive_and_off_ones_are_the_references() -> None:
    spec = load_study_file(STUDIES / "speculation-branches.toml")
    space = SearchSpace(spec, load_option_table())
    baseline = space.encode(spec.baseline)
    points = [(p.params, a) for p, a in comparison_points(space, spec, space.locate(baseline))]
    chosen = [p["speculative-algorithm"] for p, _ in points]
    # the baseline's branch (EAGLE3) is the baseline
    assert chosen == ["EAGLE3-adaptive", "NGRAM", "off"]
    assert [a.get(Key.REFERENCE) for _, a in points] == ["adaptive", None, "off"]
    assert not any(branches.OUTSIDE in a for _, a in points)  # all inside the space
    ngram = points[1][0]
    # shared flags: the baseline's
    assert ngram["mem-fraction-static.k"] == baseline["mem-fraction-static.k"]
    # its own meaning there: the middle of 2..16
    assert ngram["speculative-num-draft-tokens.pos"] == 7
    assert all(space.decode(p).config is not None for p, _ in points)


def test_a_space_without_branches_gets_both_references_outside_it_unless_told_not_to() -> None:
    spec = load_study_file(STUDIES / "simulated.toml")
    space = SearchSpace(spec, load_option_table())
    baseline = space.encode(spec.baseline)
    points = [(p.params, a) for p, a in comparison_points(space, spec, space.locate(baseline))]
    assert [(p[branches.REFERENCE], a[Key.REFERENCE], a[branches.OUTSIDE]) for p, a in points] == [
        ("adaptive", "adaptive", True), ("off", "off", True)]
    # a bench landscape's study
    assert comparison_points(space, spec, space.locate(baseline), outside=False) == []
    quiet = replace(spec, study=replace(spec.study, compare=()))
    assert comparison_points(space, quiet, space.locate(baseline)) == []
