"""A search space with branches: the kind of speculation first, each branch's own flags only on
it."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tests.helpers import STUDIES
from tuner.core.errors import StudyFileError
from tuner.sglang.options import load_option_table
from tuner.study import branches
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace

DEMO = STUDIES / "speculation-branches.toml"


@pytest.fixture(scope="module")
def space() -> SearchSpace:
    spec = load_study_file(DEMO)
    return SearchSpace(spec, load_option_table())


def flags_of(space: SearchSpace, params: dict[str, object]) -> dict[str, object]:
    proposal = space.decode(params)
    assert proposal.config is not None, proposal.reason
    return dict(proposal.config.flags)


def test_each_branch_proposes_only_its_own_flags(space: SearchSpace) -> None:
    names = {b.choice: {d.flag for d in space.active(b)} for b in space.branches}
    common = {"--speculative-algorithm", "--mem-fraction-static", "--cuda-graph-max-bs-decode"}
    assert names["EAGLE3"] == common | set(branches.TREE_FLAGS)
    assert names["EAGLE3-adaptive"] == common
    assert names["NGRAM"] == common | {"--speculative-num-draft-tokens",
                                       "--speculative-ngram-max-bfs-breadth"}
    assert names["off"] == common
    # every point of the space is on one branch and carries exactly that branch's parameters
    sizes = space.branch_sizes()
    assert space.raw_size() == sum(sizes.values()) == len(list(space.points()))
    assert sizes["off"] == sizes["EAGLE3-adaptive"] == 3 * 2


def test_command_lines_per_branch(space: SearchSpace) -> None:
    common = {"mem-fraction-static.k": 17, "cuda-graph-max-bs-decode.idx": 1}
    adaptive = flags_of(space, {"speculative-algorithm": "EAGLE3-adaptive", **common})
    assert adaptive["--speculative-algorithm"] == "EAGLE3" \
           and adaptive["--speculative-adaptive"] is True
    assert not set(branches.TREE_FLAGS) & set(adaptive)  # SGLang picks the steps at runtime
    ngram = flags_of(space,
                     {"speculative-algorithm": "NGRAM", "speculative-num-draft-tokens.pos": 10,
                      "speculative-ngram-max-bfs-breadth.idx": 0, **common})
    assert ngram["--speculative-num-draft-tokens"] == 12  # the range as written: no EAGLE tree cap
    assert ngram["--speculative-ngram-max-bfs-breadth"] == 1
    assert "--speculative-draft-model-path" not in ngram  # no draft model on NGRAM
    off = flags_of(space, {"speculative-algorithm": "off", **common})
    assert not any(f.startswith("--speculative-") for f in off)
    with pytest.raises(KeyError):
        # its tree parameters are missing
        space.decode({"speculative-algorithm": "EAGLE3", **common})


def test_optuna_asks_the_algorithm_first_then_its_branch(space: SearchSpace) -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen = set()
    for _ in range(40):
        trial = study.ask()
        proposal = space.suggest(trial)
        branch = space.branch(trial.params)
        assert branch is not None
        # nothing of another branch
        assert set(trial.params) == {d.name for d in space.active(branch)}
        seen.add(branch.kind)
        study.tell(trial, 1.0 if proposal.config is not None else 0.0)
    assert seen == set(branches.BranchKind)


def test_reference_trials_run_sglangs_own_choices_on_a_space_without_branches() -> None:
    spec = load_study_file(STUDIES / "simulated.toml")
    space = SearchSpace(spec, load_option_table())
    assert space.reference_algorithm() == "EAGLE3" and not space.branches
    base = space.encode(spec.baseline)
    adaptive = space.decode({**base, branches.REFERENCE: "adaptive"})
    off = space.decode({**base, branches.REFERENCE: "off"})
    assert adaptive.config is not None and off.config is not None
    assert adaptive.config.get("--speculative-adaptive") is True
    assert adaptive.config.get("--speculative-num-steps") is None
    assert adaptive.config.get("--cuda-graph-max-bs-decode") == 64  # the baseline's other flags
    assert off.config.get("--speculative-algorithm") is None and off.key != adaptive.key


def _write(tmp_path: Path, choices: str, baseline: str = "") -> Path:
    text = DEMO.read_text()
    text = text.replace('choices = ["EAGLE3", "EAGLE3-adaptive", "NGRAM", "off"]',
                        f"choices = {choices}")
    if baseline:
        start = text.index("[baseline]")
        end = text.index("[benchmark]")
        text = text[:start] + "[baseline]\n" + baseline + "\n\n" + text[end:]
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


def test_an_adaptive_branch_on_an_algorithm_sglang_does_not_adapt_is_one_line(
        tmp_path: Path) -> None:
    path = _write(tmp_path, '["EAGLE3", "NGRAM-adaptive", "off"]')
    with pytest.raises(StudyFileError) as err:
        load_study_file(path)
    lines = str(err.value).splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        f"{path}: search.speculative-algorithm.choices: 'NGRAM-adaptive': SGLang's "
        "adaptive steps run on EAGLE, EAGLE3, NEXTN only")


def test_a_baseline_gives_the_flags_of_its_own_branch_only(tmp_path: Path) -> None:
    path = _write(tmp_path, '["EAGLE3", "NGRAM", "off"]', 'speculative-algorithm = "off"\n'
                  "mem-fraction-static = 0.85\ncuda-graph-max-bs-decode = 64")
    spec = load_study_file(path)  # no tree flags needed on "off"
    space = SearchSpace(spec, load_option_table())
    assert space.covers(space.encode(spec.baseline))
    path = _write(tmp_path, '["EAGLE3", "NGRAM", "off"]', 'speculative-algorithm = "NGRAM"\n'
                  "mem-fraction-static = 0.85\ncuda-graph-max-bs-decode = 64")
    with pytest.raises(StudyFileError) as err:
        load_study_file(path)
    assert "gives no value for --speculative-num-draft-tokens, " \
           "--speculative-ngram-max-bfs-breadth" in str(
        err.value)
    assert "--speculative-num-steps" not in str(err.value)
