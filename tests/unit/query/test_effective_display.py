"""What SGLang runs, where it differs from the proposed command line, in ``trials``, ``trial N``,
``best`` (every format) and the report; the deployable command stays the proposed one."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import optuna
from rich.console import Console

from tuner.query.answers import best, ranking_for, trials
from tuner.query.detail import as_dict
from tuner.query.detail import render as render_detail
from tuner.query.effective import Change, changes
from tuner.query.export import export
from tuner.query.load import open_stored_study
from tuner.query.table import TrialRow, render
from tuner.report.build import write_report
from tuner.sglang.launch import ServerConfig
from tuner.store.keys import Key
from tuner.store.storage import make_storage
from tuner.study.load import load_study_file

TREE = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 5, "speculative_eagle_topk": 4,
        "speculative_num_draft_tokens": 8}


def test_changes_name_what_sglang_runs_and_why() -> None:
    config = ServerConfig.build({"--model-path": "m", "--attention-backend": "flashmla",
                                 "--page-size": 1})
    found = changes(config, {"attention_backend": "flashmla", "page_size": 64,
                             "cuda_graph_disabled": False})
    assert [c.text() for c in found] == ["page-size 64 (SGLang forces it for flashmla)"]

    auto = ServerConfig.build({"--model-path": "m", "--speculative-algorithm": "EAGLE3",
                               "--attention-backend": "torch_native"})
    texts = [c.text()
             for c in changes(auto, {**TREE, "attention_backend": "torch_native", "page_size": 1,
                                     "cuda_graph_disabled": True,
                                     "max_running_requests": None})]
    assert texts == ["speculative-num-steps 5 (SGLang's auto-chosen draft tree)",
                     "speculative-eagle-topk 4 (SGLang's auto-chosen draft tree)",
                     "speculative-num-draft-tokens 8 (SGLang's auto-chosen draft tree)",
                     "disable-cuda-graph on (SGLang turns CUDA graphs off for torch_native)"]
    # Unknown values (None) and values the command line already gives are no change.
    assert changes(auto, {"speculative_algorithm": "EAGLE3", "speculative_num_steps": None}) == ()
    assert changes(None, TREE) == () and changes(auto, None) == ()


def _add_flashmla_winner(study_file: Path) -> int:
    """A copy of trial 0, deployed with flashmla and page size 1 (SGLang runs 64), measured 1.5x
    faster."""
    spec = load_study_file(study_file)
    study = optuna.load_study(study_name=spec.study.name, storage=make_storage(spec.study.storage))
    first = study.trials[0]
    attrs = dict(first.user_attrs)
    config = ServerConfig.from_json(attrs[Key.CONFIG])
    flags = {**config.flag_dict, "--attention-backend": "flashmla", "--page-size": 1}
    attrs[Key.CONFIG] = ServerConfig.build(flags, dict(config.env)).to_json()
    attrs[Key.CONFIG_KEY] = "flashmla"
    attrs[Key.EFFECTIVE] = {**attrs[Key.EFFECTIVE], "attention_backend": "flashmla",
                            "page_size": 64}
    attrs[Key.BASELINE] = False
    attrs[Key.PHASES] = {c: {k: v * 1.5 if k in ("per_request_tok_s_mean", "aggregate_tok_s") else v
                             for k, v in m.items()} for c, m in attrs[Key.PHASES].items()}
    attrs[Key.SCORE] = 1.5
    study.add_trial(optuna.trial.create_trial(
        params=first.params, distributions=first.distributions, value=1.5, user_attrs=attrs,
        constraints=dict(first.constraints or {})))
    return len(study.trials) - 1


def test_every_answer_shows_what_sglang_runs(stored_study: Path, tmp_path: Path) -> None:
    number = _add_flashmla_winner(stored_study)
    table = trials(stored_study, width=300).output
    row = next(line for line in table.splitlines() if f"★{number} " in line)
    assert "SGLang runs" in table and "page-size 64" in row

    # once: best's formats and trial N read the same ranking
    stored = open_stored_study(stored_study)
    ranking = ranking_for(stored)
    winner = ranking.best
    assert winner is not None and winner.number == number
    answer = best(stored_study, None, (), "command")
    # stdout: the command, as deployed
    assert answer.output.startswith("python3 -m sglang.launch_server")
    assert "--page-size 1" in answer.output
    assert f"SGLang runs trial {number} with: page-size 64 (SGLang forces it for " \
           "flashmla)" in answer.notes
    dropin = export(stored.spec, ranking, winner, "dropin")
    assert dropin.startswith(
        "# SGLang runs this with: page-size 64 (SGLang forces it for flashmla)\n")
    data = json.loads(export(stored.spec, ranking, winner, "json"))
    assert data["flags"]["--page-size"] == 1 and data["effective"]["page_size"] == 64
    assert data["sglang_changes"] == [Change("--page-size", 1, 64,
                                             "SGLang forces it for flashmla").to_json()]
    detail = render_detail(as_dict(winner, is_best=True, weights="c1=0.5,c64=0.5"))
    assert "SGLang runs it with:\n  page-size 64 (SGLang forces it for flashmla)" in detail

    report = write_report(stored_study, tmp_path / "report")
    page = report.page.read_text()
    assert "SGLang runs it with page-size 64 (SGLang forces it for flashmla)" in page
    assert "# SGLang runs this with: page-size 64" in page
    assert "SGLang was not asked" in page  # the oracle study had no SGLang to ask
    rows = list(csv.DictReader(io.StringIO((tmp_path / "report" / "trials.csv").read_text())))
    assert next(r for r in rows
                if r["number"] == str(number))["sglang_runs"].startswith("page-size 64")


def _row(number: int, found: tuple[Change, ...]) -> TrialRow:
    return TrialRow(number=number, status="ok", flags=(), speeds=(), accept_length=None, score=None,
                    feasible=True,
                    failure=None, changes=found, effective={"attention_backend": "flashinfer"})


def test_what_every_trial_shares_is_said_once() -> None:
    backend = Change("--attention-backend", None, "flashinfer",
                     "SGLang's default for this GPU and model")
    page = Change("--page-size", 1, 64, "SGLang forces it for flashmla")
    buffer = io.StringIO()
    Console(file=buffer, width=200,
            color_system=None).print(render([_row(0, (backend,)), _row(1, (backend,))], [],
                                            None))
    shared_only = " ".join(buffer.getvalue().split())  # the caption wraps at the table's width
    assert "every trial: SGLang runs attention-backend flashinfer (SGLang's default" in shared_only
    # no column repeating it on each row
    assert "SGLang runs" not in shared_only.split("every trial")[0]
    buffer = io.StringIO()
    Console(file=buffer, width=200,
            color_system=None).print(render([_row(0, (backend,)), _row(1, (backend, page))],
                                            [], None))
    own = buffer.getvalue()
    assert "SGLang runs" in own.split("every trial")[0] and "page-size 64" in own
