"""The same questions on a PostgreSQL storage: a real server from the system's binaries, psycopg 3
as driver."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from click.testing import CliRunner

from tests.integration.query.test_dashboard import check_study_detail, wsgi_get
from tests.postgres import postgres_server
from tests.study_factory import run_oracle_study, write_study_file
from tuner.cli import main
from tuner.query.dashboard import make_app
from tuner.query.load import open_stored_study
from tuner.store.fingerprint import StudyFileChanged, record_or_check
from tuner.study.load import load_study_file

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def pg_study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with postgres_server() as url:
        path = write_study_file(tmp_path_factory.mktemp("pg"), "pg-demo", storage=url)
        run_oracle_study(path, 10)
        yield path


def test_best_trials_and_report_on_postgresql(pg_study: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    best = runner.invoke(main,
                         ["best", str(pg_study), "--format", "json", "--weights", "c1=0.7,c64=0.3"])
    assert best.exit_code == 0, best.stderr
    winner = json.loads(best.stdout)
    assert winner["study"] == "pg-demo" and winner["weights"] == {"c1": 0.7, "c64": 0.3}
    table = json.loads(runner.invoke(main, ["trials", str(pg_study), "--json"]).stdout)
    assert len(table["trials"]) >= 10
    report = runner.invoke(main, ["report", str(pg_study), "-o", str(tmp_path / "r")])
    assert report.exit_code == 0, report.stderr
    assert "pg-demo" in (tmp_path / "r" / "index.html").read_text()
    assert "***" not in best.stderr  # no password in this URL; nothing to redact, nothing leaked


def test_dashboard_on_postgresql(pg_study: Path) -> None:
    stored = open_stored_study(pg_study)
    check_study_detail(wsgi_get(make_app(stored), f"/api/studies/{stored.study._study_id}"),
                       pg_study)


def test_changed_study_file_is_noticed_on_postgresql(pg_study: Path) -> None:
    original = pg_study.read_text()
    try:
        pg_study.write_text(original.replace("max_tokens = 256", "max_tokens = 32"))
        stored = open_stored_study(pg_study)
        assert stored.warnings and "[benchmark] has changed" in stored.warnings[0]
        with pytest.raises(StudyFileChanged):
            record_or_check(stored.study, stored.spec)
    finally:
        pg_study.write_text(original)


def test_a_study_missing_from_the_database_is_reported_and_not_created(pg_study: Path) -> None:
    url = load_study_file(pg_study).study.storage
    names = optuna.get_all_study_names(url)
    other = pg_study.with_name("other.toml")
    other.write_text(pg_study.read_text().replace('name = "pg-demo"', 'name = "never-ran"'))
    for args in (["best"], ["deploy", "--best"], ["trials"]):
        result = CliRunner().invoke(main, [args[0], str(other), *args[1:]])
        assert result.exit_code == 2
        assert result.stderr.startswith("error: study 'never-ran' has never run") \
               and result.stderr.count("\n") == 1
    assert optuna.get_all_study_names(url) == names  # load_study on a missing name created nothing


def test_a_database_without_optuna_tables_gets_none(pg_study: Path) -> None:
    url = load_study_file(pg_study).study.storage
    admin = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sqlalchemy.text("CREATE DATABASE untouched"))
    admin.dispose()
    empty_url = url.rsplit("/", 1)[0] + "/untouched"
    empty = pg_study.with_name("empty.toml")
    empty.write_text(pg_study.read_text().replace(url, empty_url))
    result = CliRunner().invoke(main, ["best", str(empty)])
    assert result.exit_code == 2 and "holds no Optuna study" in result.stderr
    engine = sqlalchemy.create_engine(empty_url)
    try:
        assert sqlalchemy.inspect(engine).get_table_names() == []  # reading made no tables
    finally:
        engine.dispose()


def test_validate_prints_no_password(pg_study: Path) -> None:
    url = load_study_file(pg_study).study.storage
    # trust auth: the password is not checked
    secret = url.replace("spectune@", "spectune:s3cret-pw@")
    study = pg_study.with_name("secret.toml")
    study.write_text(pg_study.read_text().replace(url, secret))
    result = CliRunner().invoke(main, ["validate", str(study)])
    assert result.exit_code == 0, result.stderr
    assert "s3cret-pw" not in result.stdout + result.stderr and "spectune:***@" in result.stdout
    assert "measured (`spectune tune` resumes it)" in result.stdout  # it read the stored study
