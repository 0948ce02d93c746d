"""`spectune init --template`: one study over the whole speculative choice per kind of model, valid
as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.app.init import InitRequest, write_study_file
from tuner.sglang.options import load_option_table
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace


@pytest.mark.parametrize(("template", "kind", "model", "draft", "branches"), [
    ("eagle3", "local", "Qwen/Qwen3-8B", "org/eagle3-head", ["EAGLE3", "EAGLE3-adaptive", "off"]),
    ("mtp", "local", "Qwen/Qwen3.5-35B-A3B", None, ["NEXTN", "NEXTN-adaptive", "off"]),
    ("ngram", "local", "Qwen/Qwen3-8B", None, ["NGRAM", "off"]),
    ("mtp", "simulated", None, None, ["NEXTN", "NEXTN-adaptive", "off"]),
])
def test_each_template_validates_and_tunes_its_branches(template: str, kind: str, model: str | None,
                                                       draft: str | None, branches: list[str],
                                                       tmp_path: Path) -> None:
    path = write_study_file(InitRequest(kind=kind, model=model, draft=draft, template=template),
                            tmp_path / "study.toml")  # validated before it is written
    spec = load_study_file(path)
    space = SearchSpace(spec, load_option_table())
    assert [b.choice for b in space.branches] == branches
    assert ("--speculative-draft-model-path" in spec.server_flags) == (template == "eagle3")
    assert space.covers(space.encode(spec.baseline))
    if kind == "simulated":  # the simulator's profile of a model with its own MTP head
        assert spec.target.settings.profile == "qwen3.5-35b-a3b-mtp-1x-h200"  # type: ignore[attr-defined]
