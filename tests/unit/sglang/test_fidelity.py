"""spectune's SGLang rules held to what the real SGLang 0.5.23 does (fixture:
bench/sglang_fidelity/generate.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tuner.sglang import rules
from tuner.sglang.hardware import Hardware
from tuner.sglang.launch import FlagValue, ServerConfig
from tuner.sglang.loading import draft_backend_refusal
from tuner.sglang.options import load_option_table
from tuner.sglang.parse import InvalidServerArgs, parse_server_args
from tuner.sglang.resolution import RESOLUTION_INPUTS, resolve
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace

FIXTURE = Path(__file__).parents[2] / "fixtures" / "sglang-0.5.23-fidelity.json"
DATA = json.loads(FIXTURE.read_text(encoding="utf-8"))
FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
          "page_size", "attention_backend", "cuda_graph_disabled", "max_running_requests")

#: Where spectune deliberately differs from SGLang's argument checks, and why.
DELIBERATE: dict[str, str] = {
    "sm90 --model-path @model:llama --context-length 1M": (
        "SGLang compares --context-length with the model's max_position_embeddings (config.json); "
        "the rules do not read the model's config, so the real server's refusal (exit 1, seconds) "
        "is left to it"),
}


def _argv(case: dict[str, Any]) -> list[str]:
    return [f"/models/{a.removeprefix('@model:')}" if a.startswith("@model:") else a
            for a in case["argv"]]


def _architecture(case: dict[str, Any]) -> str | None:
    model = next((a for a in case["argv"] if a.startswith("@model:")), None)
    return DATA["architectures"][model.removeprefix("@model:")] if model else None


def spectune_verdict(case: dict[str, Any]) -> dict[str, Any]:
    try:
        args = parse_server_args(_argv(case), exit_on_error=False)
    except InvalidServerArgs as exc:
        return {"verdict": "refused", "exit_code": 2, "error": f"sglang serve: error: {exc}"}
    verdict = rules.judge(args, _hardware(case))
    if verdict.violation is not None:
        return {"verdict": "refused", "exit_code": 1, "error": verdict.violation.message}
    assert verdict.effective is not None
    return {"verdict": "accepted", "effective": {f: verdict.effective[f] for f in FIELDS}}


def _hardware(case: dict[str, Any]) -> Hardware:
    major, minor = DATA["gpus"][case["gpu"]]["capability"]
    return Hardware(_architecture(case), (int(major), int(minor)))


def _key(case: dict[str, Any]) -> str:
    return f"{case['gpu']} {' '.join(case['argv'])}"


CASES = [pytest.param(c, id=f"{i}-{c['class']}") for i, c in enumerate(DATA["cases"])]


def loading_refusal(case: dict[str, Any]) -> str | None:
    """What loading the draft model raises for a configuration SGLang's argument checks accept (the
    fixture records those checks only): the draft backend table (tuner/sglang/loading.py) applied to
    SGLang's own resolved values, so what decides is SGLang's resolution, not the rules'."""
    if case["verdict"] != "accepted":
        return None
    refusal = draft_backend_refusal(parse_server_args(_argv(case), exit_on_error=False),
                                    case["effective"])
    return refusal.message if refusal is not None else None


def test_fixture_covers_every_case_class() -> None:
    classes = {c["class"] for c in DATA["cases"]}
    assert {"split-backends", "draft-backend", "hardware-gate", "adaptive", "rejection-sampling",
            "draft-window",
            "ngram", "auto-choose", "bounds", "stray", "alias", "converter", "required"} <= classes
    assert len(DATA["cases"]) >= 300


@pytest.mark.parametrize("case", CASES)
def test_rules_agree_with_sglang(case: dict[str, Any]) -> None:
    if _key(case) in DELIBERATE:
        pytest.skip(DELIBERATE[_key(case)])
    ours = spectune_verdict(case)
    # refused while loading the draft model: never deployed
    if (loading := loading_refusal(case)) is not None:
        assert ours == {"verdict": "refused", "exit_code": 1, "error": loading}
        return
    assert ours["verdict"] == case["verdict"], (case["error"], ours.get("error"))
    if case["verdict"] == "refused":
        if case["exit_code"] == 1:  # argparse texts are the simulator's to match (its own test)
            assert ours["error"] == case["error"]
        return
    real = case["effective"]
    mismatched = {f: (ours["effective"][f], real[f]) for f in FIELDS
                  if ours["effective"][f] != real[f]
                  and ours["effective"][f] is not None}
    assert not mismatched, mismatched


# ----- the search space's decode path: what spectune would deploy and record ----------------------
TABLE = load_option_table(DATA["sglang_version"])
STUDY = """
[study]
name = "fidelity"
[target]
kind = "local"
command = ["python3", "-m", "sglang.launch_server"]
[search]
page-size = { choices = [1, 16] }
[benchmark]
phases = [{ concurrency = 1, requests = 2 }]
"""

#: Where the space deliberately differs from SGLang, beyond DELIBERATE, and why.
SPACE_DELIBERATE: dict[str, str] = {
    "sm90 --model-path @model:llama --speculative-algorithm EAGLE3 --speculative-draft-model-path "
    "@model:llama --speculative-num-steps 2 --speculative-eagle-topk 4 "
    "--speculative-num-draft-tokens 30": (
        "SGLang starts this tree, then every request fails (topk + (steps−1)·topk² + 1 = 21 < 30 "
        "draft tokens, #5160): spectune never deploys it"),
    "sm90 --model-path @model:llama --speculative-algorithm DFLASH --speculative-draft-model-path "
    "@model:llama": (
        "DFLASH's auto-chosen draft tree (1 step, topk 1, 16 draft tokens) is not modelled by the "
        "rules: they accept it and record the tree as unknown, never a wrong value"),
}


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> SearchSpace:
    path = tmp_path_factory.mktemp("fidelity") / "fidelity.toml"
    path.write_text(STUDY, encoding="utf-8")
    return SearchSpace(load_study_file(path), TABLE)


def _flags(argv: list[str]) -> dict[str, FlagValue]:
    """The study-file flags (typed, as the study file gives them) whose command line is ``argv``."""
    args = parse_server_args(argv, exit_on_error=False)
    flags: dict[str, FlagValue] = {}
    for token in argv:
        if token.startswith("--"):
            spec = TABLE.lookup(token, allow_abbrev=True)
            flags[spec.name] = args[spec.dest]
    return flags


def test_the_space_judges_what_the_rendered_command_line_parses_to(space: SearchSpace) -> None:
    # The space overlays typed flags on the parser's defaults; rendering and parsing must give the
    # same.
    for case in DATA["cases"]:
        if case["exit_code"] != 2:
            config = ServerConfig.build(_flags(_argv(case)))
            assert parse_server_args(config.argv(TABLE), exit_on_error=False) == parse_server_args(
                _argv(case), exit_on_error=False)


def test_resolution_reads_only_its_declared_inputs() -> None:
    read: set[str] = set()

    class Recording(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            read.add(key)
            return super().get(key, default)

    for case in DATA["cases"]:
        if case["exit_code"] != 2:
            resolve(Recording(parse_server_args(_argv(case), exit_on_error=False)),
                    model_architecture=_architecture(case),
                    compute_capability=_hardware(case).compute_capability
                    or (9, 0))
    assert read <= set(RESOLUTION_INPUTS)


SPACE_CASES = [pytest.param(c, id=f"{i}-{c['class']}") for i, c in enumerate(DATA["cases"])
               if c["exit_code"] != 2]


def test_allow_lists_name_fixture_lines() -> None:
    keys = {_key(c) for c in DATA["cases"]}
    assert set(DELIBERATE) <= keys and set(SPACE_DELIBERATE) <= keys


def test_space_cases_leave_out_only_argparse_errors() -> None:
    # Argparse-level errors (unknown, ambiguous or malformed flags, a missing --model-path) never
    # reach the space: the study-file check refuses them first, and the model path may live in the
    # target's command.
    assert len(DATA["cases"]) - len(SPACE_CASES) \
           == sum(1 for c in DATA["cases"] if c["exit_code"] == 2) == 7


@pytest.mark.parametrize("case", SPACE_CASES)
def test_space_deploys_and_records_what_sglang_runs(case: dict[str, Any],
                                                    space: SearchSpace) -> None:
    key = _key(case)
    if key in DELIBERATE or key in SPACE_DELIBERATE:
        pytest.skip(DELIBERATE.get(key) or SPACE_DELIBERATE[key])
    judging = SearchSpace(dataclasses.replace(space.spec, hardware=_hardware(case)), TABLE)
    config = ServerConfig.build(_flags(_argv(case)))
    ours = judging.judge(config)
    if (loading := loading_refusal(case)) is not None:
        assert ours == loading, "spectune would deploy a configuration SGLang refuses while loading"
        return
    if case["verdict"] == "refused":
        assert ours == case["error"], "spectune would deploy a configuration SGLang refuses"
        return
    assert not isinstance(ours, str), f"spectune refuses what SGLang accepts: {ours}"
    real = case["effective"]
    assert {f: ours[f] for f in FIELDS} == {f: real[f] for f in FIELDS}, \
           "recorded values differ from SGLang's"
