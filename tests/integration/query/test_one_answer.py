"""One winner rule, one implementation: under any --weights / --constraint, `best`, `trials`, the
report (summary.md, trials.csv, index.html) and the dashboard name the same trial — and the same
unconfirmed leader — and the dashboard's importances are the report's. The stored study has
intervals and a confirmation stage that re-measured only its top trial, so other weights make other
trials lead, unconfirmed."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tests.integration.query.test_dashboard import wsgi_get
from tuner.cli import main
from tuner.query.answers import ranking_for
from tuner.query.dashboard import make_app
from tuner.query.importance import importance_values
from tuner.query.load import open_stored_study
from tuner.query.ranking import Ranking
from tuner.query.table import rows
from tuner.report.build import summary_markdown, trials_csv
from tuner.store.optuna_private import study_id_of

#: Ten re-weightings (and extra constraints) of the stored study: a significant confirmed winner,
#: the baseline staying, an unconfirmed leader beside the confirmed answer, and an answer with no
#: confirmation under them.
WEIGHTINGS: list[tuple[str, tuple[str, ...]]] = [
    ("c1=1", ()), ("c1=0.9,c64=0.1", ()), ("c1=0.7,c64=0.3", ()),
    ("c1=0.6,c64=0.4", ("c1.error_rate<=0",)),
    ("c1=0.52,c64=0.48", ()), ("c1=0.44,c64=0.56", ()), ("c1=0.46,c64=0.54", ()),
    ("c1=0.3,c64=0.7", ()), ("c1=0,c64=1", ()), ("c1=0.7,c64=0.3", ("c64.ttft_p99_ms<110",)),
]


def _run(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, (args, result.stderr, result.exception)
    return result.stdout, result.stderr


#: The weightings whose report is written in full and whose table and importances are compared too
#: (each kind once: a significant confirmed winner, an unconfirmed leader beside the answer, no
#: confirmation under them).
FULL = (0, 5, 9)


def _check_full(study: Path, out: Path, options: list[str], ranking: Ranking, app: Any) -> None:
    expected = ranking.best.number if ranking.best else None
    leader = ranking.unconfirmed_leader.number if ranking.unconfirmed_leader else None
    table = _run("trials", str(study), *options)[0]
    assert re.search(rf"^\W*★{expected}\b", table, re.M), table
    if leader is not None:
        assert re.search(rf"^\W*☆{leader}\b", table, re.M), table
    _run("report", str(study), "-o", str(out), *options)
    assert f"Best: trial {expected} (" in (out / "summary.md").read_text()
    assert f'<tr class="best"><td>★{expected}</td>' in (out / "index.html").read_text()
    if leader is not None:
        assert f"<td>☆{leader}</td>" in (out / "index.html").read_text()
    stored = open_stored_study(study)
    flags = [p.flag for p in stored.spec.search]
    shown = wsgi_get(app, f"/api/studies/{study_id_of(stored.study)}/param_importances")[
        "param_importances"][0]
    found = importance_values(ranking, flags)
    assert found is not None
    assert [i["name"] for i in shown] == sorted(found[0], key=lambda f: -found[0][f])
    assert all(abs(i["importance"] - found[0][i["name"]]) < 1e-9 for i in shown)


def test_five_surfaces_name_the_same_trial_under_ten_weightings(confirmed_study: Path,
                                                                tmp_path: Path) -> None:
    stored = open_stored_study(confirmed_study)
    seen = {"significant": 0, "baseline stays": 0, "unconfirmed leader": 0, "not confirmed": 0}
    for index, (weights, constraints) in enumerate(WEIGHTINGS):
        options = ["--weights", weights, *(w for c in constraints for w in ("--constraint", c))]
        ranking = ranking_for(stored, weights, constraints)
        verdict = ranking.verdict
        seen["significant" if verdict and verdict.significant else "baseline stays" if verdict else
             "not confirmed"] += 1
        seen["unconfirmed leader"] += ranking.unconfirmed_leader is not None
        expected = ranking.best.number if ranking.best else None
        leader = ranking.unconfirmed_leader.number if ranking.unconfirmed_leader else None

        flags = [p.flag for p in stored.spec.search]
        best_json, best_notes = _run("best", str(confirmed_study), *options, "--format", "json")
        data = json.loads(best_json)
        assert (data["trial"], data["unconfirmed_leader"]) == (expected, leader), weights
        if leader is not None:  # named beside the answer, with the command that confirms it
            assert "leader under weights" in best_notes and f"trial {leader}," in best_notes
            assert f"--trials {leader}" in best_notes and "spectune confirm" in best_notes

        trials = json.loads(_run("trials", str(confirmed_study), *options, "--json")[0])
        assert (trials["best"], trials["unconfirmed_leader"]) == (expected, leader), weights
        # The report's Markdown and CSV (the `report` command writes exactly these; in full below,
        # for some).
        summary = summary_markdown(stored, ranking)
        assert f"Best: trial {expected} (" in summary, summary
        # ... with the figure `best` answers by: the confirmed score when the winner rule judged it.
        headline = next(line for line in summary.splitlines() if line.startswith("Best: trial"))
        confirmed = (data.get("confirmed") or {}).get("score") if verdict is not None else None
        assert f"score {confirmed if confirmed is not None else data['score']:.3f}" in headline, \
               (weights, headline)
        assert ("fresh run(s)" in headline) == (confirmed is not None), headline
        assert ("Verdict:" in summary) == (verdict is not None)
        if leader is not None:
            assert f"trial {leader}, score" in summary and "never confirmed" in summary
        roles = {int(r["number"]): r["answer"]
                 for r in csv.DictReader(io.StringIO(trials_csv(rows(ranking, flags), ranking)))}
        assert [n for n, role in roles.items() if role.startswith("best")] == [expected]
        assert [n for n, role in roles.items()
                if role.startswith("leader")] == ([leader] if leader is not None
                                                   else [])
        app = make_app(stored, ranking.weights, ranking.constraints)
        detail = wsgi_get(app, f"/api/studies/{study_id_of(stored.study)}")
        assert [t["number"] for t in detail["best_trials"]] == [expected], weights
        if index in FULL:
            _check_full(confirmed_study, tmp_path / f"report-{index}", options, ranking, app)
    assert all(seen.values()), seen  # every kind of answer was compared
