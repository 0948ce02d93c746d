"""best / trials / report through the command line, on a stored SQLite study; bad input never
touches it."""

from __future__ import annotations

import hashlib
import json
import shlex
import sqlite3
from pathlib import Path

import optuna
import pytest
from click.testing import CliRunner

from tests.study_factory import run_oracle_study, write_study_file
from tuner.cli import main
from tuner.query.load import open_stored_study
from tuner.targets.unit_file import split_words


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert not isinstance(result.exception, Exception) \
           or isinstance(result.exception, SystemExit), \
        f"traceback: {result.exception!r}"
    return result.exit_code, result.stdout, result.stderr


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_best_prints_a_command_that_parses_back_to_the_winners_flags(stored_study: Path) -> None:
    code, out, err = _run("best", str(stored_study), "--weights", "c1=1")
    assert code == 0, err
    argv = shlex.split(out.replace("\\\n", " "))
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
    _, json_out, _ = _run("best", str(stored_study), "--weights", "c1=1", "--format", "json")
    data = json.loads(json_out)
    assert data["argv"] == argv and data["weights"] == {"c1": 1.0}
    assert f"trial {data['trial']} of" in err and "under weights c1=1" in err


def test_weights_change_the_answer(stored_study: Path) -> None:
    trials = {
        json.loads(_run("best", str(stored_study), "--weights", w, "--format", "json")[1])["trial"]
        for w in ("c1=1,c64=0", "c1=0,c64=1")}
    assert len(trials) == 2


def test_dropin_is_a_systemd_drop_in_with_the_same_command(stored_study: Path) -> None:
    _, out, _ = _run("best", str(stored_study), "--format", "dropin")
    data = json.loads(_run("best", str(stored_study), "--format", "json")[1])
    lines = out.splitlines()
    assert "[Service]" in lines and "ExecStart=" in lines
    exec_start = next(line for line in lines
                      if line.startswith("ExecStart=") and line != "ExecStart=")
    assert split_words(exec_start.removeprefix("ExecStart=")) == data["argv"]


def test_an_extra_constraint_is_applied(stored_study: Path) -> None:
    _, base, _ = _run("best", str(stored_study), "--format", "json")
    bound = json.loads(base)["metrics"]["c64"]["ttft_p99_ms"]
    code, out, err = _run("best", str(stored_study), "--format", "json", "--constraint",
                          f"c64.ttft_p99_ms<{bound}")
    if code == 0:
        assert json.loads(out)["metrics"]["c64"]["ttft_p99_ms"] < bound
    else:
        assert code == 2 and "no measured trial is feasible" in err


@pytest.mark.parametrize(("args", "message"), [
    (("best", "--weights", "c1=0.7,c8=0.3"), "error: --weights: unknown weight key 'c8'"),
    (("best", "--constraint", "ttft_p99_ms<<2000"),
     "error: --constraint: cannot read 'ttft_p99_ms<<2000'"),
    (("best", "--constraint", "latency<5"), "error: --constraint: unknown metric 'latency'"),
    (("best", "--constraint", "error_rate<-1"),
     "error: no measured trial is feasible under these constraints"),
    (("trials", "--sort", "speed"), "error: --sort: unknown key 'speed'"),
    (("report", "-o", "OUT", "--weights", "c1=x"), "error: --weights: c1='x' is not a number"),
])
def test_bad_input_is_one_line_exit_2_and_leaves_the_study_alone(stored_study: Path,
                                                                 args: tuple[str, ...],
                                                                 message: str) -> None:
    db = stored_study.with_suffix(".db")
    before = _digest(db)
    command, *rest = args
    rest = [str(stored_study.parent / "report") if a == "OUT" else a for a in rest]
    code, out, err = _run(command, str(stored_study), *rest)
    assert code == 2
    assert err.startswith(message) and err.count("\n") == 1 and "Traceback" not in err
    assert out == ""
    assert _digest(db) == before
    assert not (stored_study.parent / "report").exists()


@pytest.mark.parametrize("args", [("best",), ("trials",), ("report", "-o", "OUT"),
                                  ("dashboard", "--port", "0"),
                                  ("deploy", "--best"), ("deploy", "--trial", "0")])
def test_a_study_never_run_is_an_error_and_no_database_appears(tmp_path: Path,
                                                               args: tuple[str, ...]) -> None:
    path = write_study_file(tmp_path, "fresh")
    command, *rest = (str(tmp_path / "report") if a == "OUT" else a for a in args)
    code, out, err = _run(command, str(path), *rest)
    assert code == 2 and err.startswith("error: study 'fresh' has never run") \
           and err.count("\n") == 1
    assert out == ""
    assert not path.with_suffix(".db").exists() and not (tmp_path / "report").exists()


def test_validate_says_what_is_stored_and_creates_nothing(tmp_path: Path,
                                                          stored_study: Path) -> None:
    path = write_study_file(tmp_path, "fresh")
    code, out, err = _run("validate", str(path))
    assert code == 0, err
    assert "Stored: none yet" in out and not path.with_suffix(".db").exists()
    before = _digest(stored_study.with_suffix(".db"))
    code, out, _ = _run("validate", str(stored_study))
    assert code == 0 and "Stored: " in out and " measured (`spectune tune` resumes it)" in out
    assert _digest(stored_study.with_suffix(".db")) == before


def test_a_database_without_optuna_tables_is_not_written(tmp_path: Path) -> None:
    path = write_study_file(tmp_path, "other")
    db = path.with_suffix(".db")
    with sqlite3.connect(db) as connection:  # someone else's database where the study file points
        connection.execute("CREATE TABLE notes (text TEXT)")
    before = _digest(db)
    for args in (("best",), ("deploy", "--best")):
        code, _, err = _run(args[0], str(path), *args[1:])
        assert code == 2 and "holds no Optuna study" in err and err.count("\n") == 1
    assert _digest(db) == before


def test_an_empty_study_is_an_error(tmp_path: Path) -> None:
    path = write_study_file(tmp_path, "empty")
    optuna.create_study(study_name="empty", storage=f"sqlite:///{path.with_suffix('.db')}")
    for args in (("best",), ("trials",), ("report", "-o", str(tmp_path / "r"))):
        code, _, err = _run(args[0], str(path), *args[1:])
        assert code == 2 and "study 'empty' is empty" in err


def test_trials_table_and_json(stored_study: Path) -> None:
    code, out, _ = _run("trials", str(stored_study), "--sort", "score")
    assert code == 0
    assert "num-steps" in out and "C=1 per-req tok/s" in out and "out-of-memory" in out \
           and "★" in out
    data = json.loads(_run("trials", str(stored_study), "--json")[1])
    assert [t["number"] for t in data["trials"]] == sorted(t["number"] for t in data["trials"])
    assert data["best"] == json.loads(_run("best", str(stored_study), "--format", "json")[1])[
        "trial"]


def test_a_changed_study_file_warns_on_stderr(stored_study: Path) -> None:
    stored_study.write_text(stored_study.read_text().replace("max_tokens = 256", "max_tokens = 64"))
    code, out, err = _run("best", str(stored_study))
    assert code == 0 and out.startswith("python3")
    assert "warning:" in err and "[benchmark] has changed since study 'demo' began" in err


def test_report_writes_a_page_summary_and_csv(stored_study: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "report"
    code, out, err = _run("report", str(stored_study), "-o", str(out_dir))
    assert code == 0, err
    page = out_dir / "index.html"
    assert out.strip() == str(page)
    assert sorted(p.name for p in out_dir.iterdir()) == ["index.html", "summary.md", "trials.csv"]
    text = page.read_text()
    for key in ("history", "speeds", "latencies", "importances", "failures"):
        assert f'id="plot-{key}"' in text, key
    assert "steps=3" in text and "C=64 aggr tok/s" in text and "out-of-memory" in text
    # failures' axes, hover
    assert "--mem-fraction-static" in text and "--cuda-graph-max-bs-decode" in text
    assert "rough guide" in text  # 14 trials: importances come with the caveat
    head = text.split("<body>")[0]
    assert "<script src=" not in head and "<link" not in head  # plotly.js inlined: nothing to fetch
    summary = (out_dir / "summary.md").read_text()
    assert "python3 -m sglang.launch_server" in summary and "ExecStart=" in summary
    assert "| C=1 per-request tok/s |" in summary and "%" in summary
    import csv

    rows = list(csv.reader((out_dir / "trials.csv").open(newline="")))  # messages may span lines
    assert rows[0][:3] == ["number", "status", "--speculative-num-steps"]
    assert len(rows) == 1 + len(open_stored_study(stored_study).study.trials)


def test_a_report_without_an_answer_says_why_as_best_does(stored_study: Path,
                                                          tmp_path: Path) -> None:
    """Under a constraint nothing meets, summary.md gives best's reason (the constraint named, the
    count), not "no feasible measured trial yet" of a study that has ended."""
    impossible = ("--constraint", "c64.ttft_p99_ms<0.001")
    code, _, err = _run("best", str(stored_study), *impossible)
    assert code == 2
    code, _, report_err = _run("report", str(stored_study), "-o", str(tmp_path / "r"),
                               *impossible)
    assert code == 0, report_err
    summary = (tmp_path / "r" / "summary.md").read_text()
    reason = err.strip().removeprefix("error: ")
    assert f"No answer: {reason}." in summary
    assert "c64.ttft_p99_ms<0.001" in summary and "yet" not in summary


def _failed_and_rejected(stored_study: Path) -> tuple[int, int | None]:
    trials = json.loads(_run("trials", str(stored_study), "--json")[1])["trials"]
    oom = next(t["number"] for t in trials if t["failure"] == "out-of-memory")
    rejected = next((t["number"] for t in trials if t["status"] == "rejected"), None)
    return oom, rejected


def test_trial_shows_everything_stored_about_a_failed_trial(stored_study: Path) -> None:
    oom, _ = _failed_and_rejected(stored_study)
    code, out, err = _run("trial", str(oom), str(stored_study))
    assert code == 0, err
    assert f"trial {oom}: deploy-failed" in out
    assert "flags requested (the proposal):" in out and "--mem-fraction-static" in out
    assert "flags effective (deployed):" in out and "failure: out-of-memory" in out
    data = json.loads(_run("trial", str(oom), str(stored_study), "--json")[1])
    assert data["failure_class"] == "out-of-memory" \
           and data["flags_effective"]["--mem-fraction-static"]
    code, out, err = _run("trial", "0", str(stored_study))
    assert code == 0 and "(baseline)" in out and "C=1 (scored on per-request tok/s)" in out \
           and "TTFT p99" in out
    code, _, err = _run("trial", "999", str(stored_study))
    assert code == 2 and "has no trial 999" in err


def test_trials_show_failure_messages_and_proposed_flags(stored_study: Path) -> None:
    oom, rejected = _failed_and_rejected(stored_study)
    data = json.loads(_run("trials", str(stored_study), "--json")[1])
    rows = {t["number"]: t for t in data["trials"]}
    assert "CUDA out of memory" in (rows[oom]["message"] or "")
    if rejected is not None:  # a rejected trial shows what it proposed, not "–"
        assert all(v is not None for v in rows[rejected]["flags"].values()), rows[rejected]
    code, out, _ = _run("trials", str(stored_study))
    assert code == 0 and "out-of-memory: " in out
    # A full flag name sorts like the short column name.
    short = _run("trials", str(stored_study), "--sort", "num-steps", "--json")[1]
    for key in ("speculative-num-steps", "--speculative-num-steps"):
        code, full, err = _run("trials", str(stored_study), "--sort", key, "--json")
        assert code == 0 and full == short, err


def test_best_says_when_weights_were_normalised(stored_study: Path) -> None:
    code, _, err = _run("best", str(stored_study), "--weights", "c1=0.7")
    assert code == 0 and "normalised to c1=1" in err
    assert "normalised" not in _run("best", str(stored_study), "--weights", "c1=0.5,c64=0.5")[2]


def test_deploy_of_a_trial_without_configuration_exits_2(tmp_path: Path) -> None:
    study_file = write_study_file(tmp_path, refused_backend=True)
    run_oracle_study(study_file, n_measured=10, sampler="random")  # after the designed start
    data = json.loads(_run("trials", str(study_file), "--json")[1])
    never = [t["number"] for t in data["trials"] if t["status"] == "rejected"]
    assert never, "a third of this space is refused by SGLang's rules: random proposals hit it"
    code, _, err = _run("deploy", str(study_file), "--trial", str(never[0]))
    assert code == 2 and "has no stored configuration" in err
    code, _, err = _run("deploy", str(study_file), "--trial", "99")
    assert code == 2 and "has no trial 99" in err


def test_original_configuration_is_what_trial_0_ran(stored_study: Path) -> None:
    from tuner.query.stored import original_config
    from tuner.sglang.launch import ServerConfig

    stored = open_stored_study(stored_study)
    ran = ServerConfig.from_json(stored.study.trials[0].user_attrs["config"])
    assert original_config(stored.spec).flag_dict == ran.flag_dict


def test_trials_at_120_columns_keeps_every_header_and_figure_whole(stored_study: Path) -> None:
    result = CliRunner().invoke(main, ["trials", str(stored_study)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120
    header = lines[:lines.index(next(line for line in lines if line.startswith("┡")))]
    assert "…" not in "".join(header)
    # figures fold, never end in "…" (a failure message is cut on purpose)
    for line in lines[len(header):]:
        assert "…" not in "".join(line.split("│")[1:-2]), line
    words = " ".join(line.replace("┃", " ") for line in header).split()
    for flag in open_stored_study(stored_study).spec.search:  # each hyphen-separated part, whole
        short = flag.flag.removeprefix("--").removeprefix("speculative-")
        parts = short.split("-")
        assert all(f"{p}-" in words or p in words for p in parts), (short, words)


@pytest.mark.parametrize("columns", [60, 80, 100, 120, 160, 200, 300])
def test_trials_never_crops_a_column_at_any_width(stored_study: Path, columns: int) -> None:
    """rich crops a table whose columns cannot shrink to the terminal: the right-hand columns (the
    failure) vanished at 160 and 200 columns. The table is printed whole at any width — as wide as
    the terminal where it fits, else at the least width that holds it (the terminal wraps)."""
    result = CliRunner().invoke(main, ["trials", str(stored_study)], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    width = max(len(line) for line in lines)
    assert lines[0].endswith("┓") and width == len(lines[0])
    assert width <= columns or columns < 120  # it fits wherever the compact table can
    header = " ".join(lines[:lines.index(next(line for line in lines if line.startswith("┡")))])
    assert "failure" in header and "score" in header and "accept" in header
    numbers = [line.split("│")[1].strip("★☆ ") for line in lines if line.startswith("│")]
    assert [n for n in numbers if n] == [str(t.number) for t in
                                         open_stored_study(stored_study).study.trials]
