"""A study checked against one release's option table (tuner.study.compat): the shipped examples on
every release with CUDA-graph batch-size control, a flag a release lacks refused naming the releases
that have it, a renamed flag mapped, one informative line for another release."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tuner.core.errors import StudyFileError
from tuner.sglang import versions
from tuner.sglang.options import OptionTable, load_option_table
from tuner.study.compat import check_study, version_note
from tuner.study.load import load_study_file

STUDIES = Path(__file__).parents[3] / "studies"
GRAPH_CONTROL = [v for v in versions.shipped() if versions.spelling_in("--cuda-graph-max-bs-decode",
                                                                        load_option_table(v))]


SEARCH = "[search]\nmem-fraction-static = { min = 0.8, max = 0.9, step = 0.05 }"


def _study(tmp_path: Path, body: str, version: str | None = None) -> Path:
    path = tmp_path / "s.toml"
    line = f'sglang_version = "{version}"\n' if version else ""
    path.write_text(f"""
[study]
name = "compat"
{line}[target]
kind = "local"
command = ["python3", "-m", "sglang.launch_server"]
[server.flags]
model-path = "m"
{body}
{"" if "[search]" in body else SEARCH}
[benchmark]
phases = [{{ concurrency = 1, requests = 2 }}]
""", encoding="utf-8")
    return path


def test_graph_control_spans_the_spread() -> None:
    assert {"0.5.10", "0.5.14", "0.5.20", "0.5.23"} <= set(GRAPH_CONTROL)


@pytest.mark.parametrize("example", sorted(p.name for p in STUDIES.glob("*.toml")))
@pytest.mark.parametrize("version", GRAPH_CONTROL)
def test_shipped_examples_run_on_every_release_with_graph_control(example: str,
                                                                  version: str) -> None:
    spec = load_study_file(STUDIES / example)
    table = load_option_table(version)
    check = check_study(spec, table)
    spelled = versions.spelling_in("--cuda-graph-max-bs-decode", table)
    # only a flag or value this old release lacks may stop it, and the line says which
    if not check.ok:
        assert all("does not" in p and "SGLang releases" in p for p in check.problems), \
               check.problems
        return
    flags = {p.flag for p in check.spec.search} | set(check.spec.baseline)
    assert spelled in flags and all(table.by_option(f) is not None for f in flags)
    assert check.spec.option_table is table


def test_examples_are_not_refused_on_recent_releases() -> None:
    spec = load_study_file(STUDIES / "simulated.toml")
    for version in ("0.5.10", "0.5.14", "0.5.17", "0.5.20", "0.5.22", "0.5.23"):
        assert check_study(spec, load_option_table(version)).ok, version


def test_the_old_name_maps_forward_and_the_new_one_back(tmp_path: Path) -> None:
    old = _study(tmp_path, "[search]\ncuda-graph-max-bs = { choices = [16, 32] }")
    # newest table
    assert [p.flag for p in load_study_file(old).search] == ["--cuda-graph-max-bs-decode"]
    new = _study(tmp_path, "[search]\ncuda-graph-max-bs-decode = { choices = [16, 32] }", "0.5.10")
    spec = load_study_file(new)
    assert [p.flag for p in spec.search] == ["--cuda-graph-max-bs"]
    check = check_study(spec, load_option_table("0.5.23"))
    assert check.ok and [p.flag for p in check.spec.search] == ["--cuda-graph-max-bs-decode"]
    assert check.note is not None and "0.5.10" in check.note and "0.5.23" in check.note


def test_a_flag_the_release_lacks_is_refused_naming_the_releases_that_have_it(
        tmp_path: Path) -> None:
    having = versions.releases_with("--speculative-adaptive")
    assert having and "0.5.10" not in having
    path = _study(tmp_path, """speculative-algorithm = "EAGLE"
speculative-draft-model-path = "d"
speculative-adaptive = true
[search]
speculative-num-steps = { min = 1, max = 3 }""")
    spec = load_study_file(path)
    check = check_study(spec, load_option_table("0.5.10"))
    assert not check.ok
    (problem,) = [p for p in check.problems if "speculative-adaptive" in p]
    assert f"--speculative-adaptive does not exist in SGLang 0.5.10 (SGLang releases with it: " \
           f"{versions.describe(having)})" in problem
    with pytest.raises(StudyFileError, match=r"does not exist in SGLang 0\.5\.10"):
        load_study_file(_study(tmp_path, "speculative-adaptive = true", "0.5.10"))


@pytest.mark.parametrize("backend", ["fa4", "cutlass_mla"])
def test_a_choice_the_release_lacks_names_the_releases_that_accept_it(tmp_path: Path,
                                                                      backend: str) -> None:
    """fa4 came in 0.5.3; cutlass_mla went after 0.5.17: a backend one release lacks names those
    that have it."""
    accepting = versions.releases_accepting("--attention-backend", backend)
    lacking = [v for v in versions.shipped() if v not in accepting]
    assert accepting and lacking
    spec = load_study_file(_study(tmp_path, f'attention-backend = "{backend}"', accepting[-1]))
    check = check_study(spec, load_option_table(lacking[-1]))
    assert not check.ok
    assert f"--attention-backend does not accept '{backend}' in SGLang {lacking[-1]} (SGLang " \
           "releases that do: " \
           f"{versions.describe(accepting)})" in "\n".join(check.problems)
    assert check_study(spec, load_option_table(accepting[0])).ok


def test_one_line_for_another_release_none_for_the_same() -> None:
    table = load_option_table("0.5.20")
    assert version_note(None, table) is None
    assert version_note("0.5.20", table) is None
    note = version_note("0.5.23", table)
    assert note is not None and "0.5.23" in note and "0.5.20" in note and "\n" not in note


def test_a_post_release_matches_its_base_unless_its_table_differs() -> None:
    base = load_option_table("0.5.20")
    same = OptionTable("0.5.20.post1", base.options)
    assert version_note("0.5.20", same) is None
    assert version_note("0.5.20.post1", base) is None
    changed = OptionTable("0.5.20.post1", [*base.options[:-1],
                                           dataclasses.replace(base.options[-1],
                                                               default="'changed'")])
    assert version_note("0.5.20", changed) is not None


def test_validate_names_the_table_it_used(tmp_path: Path) -> None:
    spec = load_study_file(_study(tmp_path, "", "0.5.21"))
    assert spec.option_table.version == "0.5.20"
    assert spec.table_note is not None and "nearest shipped" in spec.table_note
    unset = load_study_file(_study(tmp_path, ""))
    assert unset.study.sglang_version is None \
           and unset.option_table.version == versions.shipped()[-1]
