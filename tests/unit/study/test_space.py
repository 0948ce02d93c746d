"""Property tests: every configuration the space can emit obeys SGLang's rules and parses like
SGLang."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import optuna
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import STUDIES
from tuner.sglang import rules
from tuner.sglang.launch import ServerConfig, launch_command
from tuner.sglang.options import load_option_table
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace

TABLE = load_option_table("0.5.23")
STRICT_PARSER = TABLE.build_parser(allow_abbrev=False)

# A deliberately wide study: speculation on/off, trees, backends with page sizes, memory, graphs.
WIDE = """
[study]
name = "wide"
[target]
kind = "local"
command = ["python3", "-m", "sglang.launch_server"]
[server.flags]
model-path = "org/model name with spaces"
speculative-draft-model-path = "d"
[search]
speculative-algorithm = { choices = ["EAGLE3", "EAGLE", "off"] }
speculative-num-steps = { min = 1, max = 8 }
speculative-eagle-topk = { choices = [1, 2, 4, 8] }
speculative-num-draft-tokens = { min = 2, max = 64 }
attention-backend = { choices = ["fa3", "flashinfer", "triton", "trtllm_mha", "flex_attention", \
"torch_native"] }
page-size = { choices = [1, 16, 64] }
mem-fraction-static = { min = 0.70, max = 0.95, step = 0.01 }
cuda-graph-max-bs-decode = { choices = [8, 16, 32, 64, 128, 256] }
disable-overlap-schedule = { choices = [true, false] }
[benchmark]
phases = [{ concurrency = 1, requests = 2 }, { concurrency = 64, requests = 64 }]
"""


def wide_space(tmp_path_factory: pytest.TempPathFactory) -> SearchSpace:
    path = tmp_path_factory.mktemp("wide") / "wide.toml"
    path.write_text(WIDE)
    spec = load_study_file(path)
    return SearchSpace(spec, TABLE)


@pytest.fixture(scope="module")
def spaces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SearchSpace]:
    result = {"wide": wide_space(tmp_path_factory)}
    for name in ("simulated.toml", "qwen3.5-122b-eagle3.toml"):
        spec = load_study_file(STUDIES / name)
        result[name] = SearchSpace(spec, TABLE)
    return result


def point(space: SearchSpace) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({d.name: st.sampled_from(d.encoded_values())
                                  for d in space.dimensions})


def assert_obeys_rules(space: SearchSpace, config: ServerConfig) -> None:
    argv = config.argv(TABLE)
    ns = vars(STRICT_PARSER.parse_args(argv))  # full names only: abbreviations are off
    flags = config.flag_dict
    tree = [flags.get(f) for f in ("--speculative-num-steps", "--speculative-eagle-topk",
                                   "--speculative-num-draft-tokens")]
    speculating = "--speculative-algorithm" in flags
    assert speculating or not any(f.startswith("--speculative-") for f in flags)
    if speculating:
        assert all(v is not None for v in tree), "steps/topk/draft tokens: all three or none"
        steps, topk, draft = tree
        if topk == 1:
            assert draft == steps + 1
        else:
            assert draft - 1 <= topk + (steps - 1) * topk**2
        backend = flags.get("--attention-backend")
        if topk > 1 and (flags.get("--page-size") or 1) > 1:
            assert backend in (None, "flashinfer", "fa3", "triton")
        assert not (backend == "trtllm_mha" and topk > 1)
        assert backend != "flex_attention"
        if space.spec.max_concurrency > 48:
            assert ns["max_running_requests"] is not None
    assert rules.check(ns) == []
    # Rendered as a shell command, it splits back into exactly the same argv.
    command = launch_command(["python3", "-m", "sglang.launch_server"], config, TABLE)
    env = [f"{k}={v}" for k, v in config.env]
    assert shlex.split(command.shell()) == [*env, *command.argv]


@pytest.mark.parametrize("name", ["wide", "simulated.toml", "qwen3.5-122b-eagle3.toml"])
def test_every_emitted_configuration_obeys_sglang_rules(spaces: dict[str, SearchSpace],
                                                        name: str) -> None:
    space = spaces[name]

    # Each example parses the whole command line with the option table (~0.1 s): 150 per space.
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(point(space))
    def check(params: dict[str, Any]) -> None:
        proposal = space.decode(params)
        if proposal.config is None:
            assert proposal.reason, "a rejected point must say why"
            return
        assert_obeys_rules(space, proposal.config)

    check()


def test_wide_space_rejects_with_sglang_messages(spaces: dict[str, SearchSpace]) -> None:
    summary = spaces["wide"].enumerate(limit=20_000)
    reasons = " | ".join(summary.rejections)
    assert "Flex Attention" in reasons
    assert "trtllm_mha backend only supports topk = 1" in reasons
    assert "page_size > 1 is only supported on" in reasons
    # SGLang 0.5.23 runs EAGLE on it otherwise
    assert "got attention_backend='torch_native'" in reasons
    assert summary.valid > 0


def test_speculation_off_drops_every_speculative_flag(spaces: dict[str, SearchSpace]) -> None:
    space = spaces["wide"]
    # Any point with speculation off (scanning the product for one took minutes on this space).
    params = dict(next(space.points()),
                  **{"speculative-algorithm": "off", "attention-backend": "fa3"})
    proposal = space.decode(params)
    assert proposal.config is not None
    assert not any(f.startswith("--speculative-") for f in proposal.config.flag_dict)
    assert "--max-running-requests" not in proposal.config.flag_dict


def test_topk1_repairs_draft_tokens_and_caps_requests(spaces: dict[str, SearchSpace]) -> None:
    space = spaces["simulated.toml"]
    params = space.encode({"--speculative-num-steps": 5, "--speculative-eagle-topk": 1,
                           "--speculative-num-draft-tokens": 16, "--mem-fraction-static": 0.86,
                           "--cuda-graph-max-bs-decode": 64})
    proposal = space.decode(params)
    assert proposal.config is not None
    assert proposal.config.get("--speculative-num-draft-tokens") == 6
    assert proposal.config.get("--max-running-requests") == 64
    assert any("max-running-requests 64" in r for r in proposal.repairs)


def test_draft_fraction_stays_within_the_tree(spaces: dict[str, SearchSpace]) -> None:
    space = spaces["simulated.toml"]
    top = space.encode({"--speculative-num-steps": 1, "--speculative-eagle-topk": 2,
                        "--speculative-num-draft-tokens": 16, "--mem-fraction-static": 0.86,
                        "--cuda-graph-max-bs-decode": 64})
    assert space.decode(top).config.get("--speculative-num-draft-tokens") == 3  # topk + 0·topk² + 1
    wide = dict(top, **{"speculative-num-steps": 6})
    assert space.decode(wide).config.get("--speculative-num-draft-tokens") == 16


def test_float_grid_never_produces_float_noise(spaces: dict[str, SearchSpace]) -> None:
    space = spaces["qwen3.5-122b-eagle3.toml"]
    dim = next(d for d in space.dimensions if d.flag == "--mem-fraction-static")
    values = [dim.decode(v) for v in dim.encoded_values()]
    assert values[0] == 0.78 and values[-1] == 0.92
    assert all(repr(v) == f"{v:.2f}".rstrip("0").rstrip(".") or len(repr(v)) <= 4 for v in values)
    assert [dim.encode(v) for v in values] == dim.encoded_values()


def test_space_size_counts_distinct_configurations(spaces: dict[str, SearchSpace]) -> None:
    space = spaces["simulated.toml"]
    summary = space.enumerate()
    assert summary.complete and summary.total_points == space.raw_size() == 6 * 3 * 15 * 7 * 3
    # topk=1 collapses every draft position onto steps+1, so there are fewer distinct configs than
    # points.
    assert 0 < summary.distinct_valid < summary.valid


def test_suggest_through_optuna_matches_decode(spaces: dict[str, SearchSpace]) -> None:
    space = spaces["simulated.toml"]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    for _ in range(20):
        trial = study.ask()
        proposal = space.suggest(trial)
        assert trial.params == proposal.params
        assert proposal.config is not None
        assert_obeys_rules(space, proposal.config)
        study.tell(trial, 0.0)
    assert set(study.trials[0].distributions) == set(space.distributions())


def test_baseline_encodes_to_its_own_configuration(spaces: dict[str, SearchSpace]) -> None:
    space = spaces["qwen3.5-122b-eagle3.toml"]
    proposal = space.decode(space.encode(space.spec.baseline))
    assert proposal.config is not None
    for flag, value in space.spec.baseline.items():
        assert proposal.config.get(flag) == value


def test_config_key_identifies_equal_deployments(tmp_path: Path) -> None:
    a = ServerConfig.build({"--tp-size": 4, "--model-path": "m"}, {"X": "1"})
    b = ServerConfig.build({"--model-path": "m", "--tp-size": 4}, {"X": "1"})
    c = ServerConfig.build({"--model-path": "m", "--tp-size": 2}, {"X": "1"})
    assert a.key() == b.key() != c.key()


def test_two_spellings_of_one_server_are_one_configuration(tmp_path: Path) -> None:
    # trtllm_mha forces 64-token pages below 16: page-size 1 and 64 run the same server.
    path = tmp_path / "pages.toml"
    path.write_text("""
[study]
name = "pages"
[target]
kind = "local"
command = ["python3", "-m", "sglang.launch_server"]
gpu = "H100"
[server]
model_architecture = "LlamaForCausalLM"
[server.flags]
model-path = "m"
speculative-algorithm = "EAGLE3"
speculative-draft-model-path = "d"
speculative-num-steps = 3
speculative-eagle-topk = 1
speculative-num-draft-tokens = 4
attention-backend = "trtllm_mha"
[search]
page-size = { choices = [1, 64] }
[benchmark]
phases = [{ concurrency = 1, requests = 2 }]
""")
    space = SearchSpace(load_study_file(path), TABLE)
    summary = space.enumerate()
    assert summary.valid == 2 and summary.distinct_valid == 1
    proposal = space.decode({"page-size.idx": 0})
    assert proposal.effective is not None and proposal.effective["page_size"] == 64
    assert proposal.effective["attention_backend"] == "trtllm_mha"


def test_unknown_gpu_refuses_a_hardware_gate_naming_the_keys(tmp_path: Path) -> None:
    path = tmp_path / "gate.toml"
    path.write_text("""
[study]
name = "gate"
[target]
kind = "local"
command = ["python3", "-m", "sglang.launch_server"]
[server.flags]
model-path = "m"
[search]
attention-backend = { choices = ["cutedsl_mla", "flashinfer"] }
[benchmark]
phases = [{ concurrency = 1, requests = 2 }]
""")
    space = SearchSpace(load_study_file(path), TABLE)
    refused = space.decode({"attention-backend": "cutedsl_mla"})
    assert refused.rejected \
           and "[target] gpu or [target] compute_capability" in (refused.reason or "")
    assert not space.decode({"attention-backend": "flashinfer"}).rejected
