"""The simulator refuses and accepts exactly the command lines the real SGLang 0.5.23 does (same
exit code, same error line), in process: its argument parsing + validation, no server (fixture:
bench/sglang_fidelity/)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.sglang.test_fidelity import loading_refusal
from tuner.simulator.config import PROG, InvalidServerArgs, resolve
from tuner.simulator.profile import Profile, load_profile
from tuner.simulator.startup import plan_startup

FIXTURE = Path(__file__).parents[2] / "fixtures" / "sglang-0.5.23-fidelity.json"
DATA = json.loads(FIXTURE.read_text(encoding="utf-8"))
#: The H100 profile's model is a Llama with a 131072-token context, like the fixture's fake Llama.
BASE = load_profile("llama-3.1-8b-eagle3-1x-h100")

#: Where the simulator deliberately differs from the real SGLang, and why.
DELIBERATE: dict[str, str] = {
    "sm90 --model-path @model:llama --speculative-algorithm DFLASH --speculative-draft-model-path "
    "@model:llama": (
        "artefact of the generator's minimal venv (SGLang's DFLASH path imports a module the venv "
        "lacks)"),
}


def _profile(case: dict[str, Any]) -> Profile:
    """The base profile on the case's GPU, serving the case's model architecture (8 GPUs: tp is
    never short)."""
    model = next((a for a in case["argv"] if a.startswith("@model:")),
                 "@model:llama").removeprefix("@model:")
    hardware = dataclasses.replace(BASE.hardware, gpu_name=DATA["gpus"][case["gpu"]]["name"],
                                   num_gpus=8)
    return dataclasses.replace(
        BASE, model=dataclasses.replace(BASE.model, architecture=DATA["architectures"][model]),
        hardware=hardware)


def simulator_verdict(case: dict[str, Any]) -> dict[str, Any]:
    argv = [f"/models/{a.removeprefix('@model:')}" if a.startswith("@model:") else a
            for a in case["argv"]]
    profile = _profile(case)
    try:
        config = resolve(profile, argv, exit_on_error=False)
    except InvalidServerArgs as exc:  # what argparse prints last before exit 2
        return {"verdict": "refused", "exit_code": 2, "error": f"{PROG}: error: {exc}"}
    plan = plan_startup(profile, config)
    if plan.failure is not None:
        return {"verdict": "refused", "exit_code": 1, "error": plan.failure[-1]}
    return {"verdict": "accepted", "exit_code": None, "error": None, "config": config}


def _key(case: dict[str, Any]) -> str:
    return f"{case['gpu']} {' '.join(case['argv'])}"


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{i}-{c['class']}") for i,
                                  c in enumerate(DATA["cases"])])
def test_simulator_agrees_with_sglang(case: dict[str, Any],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if _key(case) in DELIBERATE:
        pytest.skip(DELIBERATE[_key(case)])
    monkeypatch.delenv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", raising=False)
    ours = simulator_verdict(case)
    # the fixture records argument checks; SGLang then refuses
    if (loading := loading_refusal(case)) is not None:
        # while loading the draft model, and so does the simulator's start-up
        assert (ours["verdict"], ours["exit_code"], ours["error"]) == ("refused", 1, loading)
        return
    assert (ours["verdict"], ours["exit_code"], ours["error"]) == (case["verdict"],
                                                                   case["exit_code"], case["error"])
    if case["verdict"] == "accepted":
        real, config = case["effective"], ours["config"]
        runs = {"attention_backend": config.attention_backend, "page_size": config.page_size,
                "cuda_graph_disabled": not config.cuda_graph_bs}
        if real["speculative_algorithm"] is not None:
            tree = ("speculative_num_steps", "speculative_eagle_topk",
                    "speculative_num_draft_tokens")
            runs |= {k: config.args[k]
                     for k in tree} | {"max_running_requests": config.max_running_requests}
        assert runs == {k: real[k] for k in runs}


def test_every_fixture_line_is_judged() -> None:
    assert len(DATA["cases"]) - len(DELIBERATE) >= 390
