"""The shipped option tables (generated from the real wheels by bench/sglang_versions/tables.py) and
what spectune reads from them: renamed options per release, the releases that have a flag, the
nearest table."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tuner.sglang import dump, versions
from tuner.sglang.options import OptionTable, load_option_table

SHIPPED = versions.shipped()
GRAPH = "--cuda-graph-max-bs-decode"
OLD_GRAPH = "--cuda-graph-max-bs"


def _raw(version: str) -> dict[str, object]:
    path = resources.files("tuner.sglang").joinpath("data", f"sglang-{version}.json")
    data: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_a_spread_of_releases_ships() -> None:
    for release in ("0.5.6", "0.5.10", "0.5.14", "0.5.17", "0.5.20", "0.5.22", "0.5.23"):
        assert release in SHIPPED or f"{release}.post2" in SHIPPED, release
    assert list(SHIPPED) == sorted(SHIPPED, key=versions.release_key)


@pytest.mark.parametrize("version", SHIPPED)
def test_each_table_is_the_generators_output(version: str) -> None:
    """The file is what dump.py writes: its own version, the fingerprint of its rows, no hand
    edits."""
    raw = _raw(version)
    assert raw["sglang_version"] == version
    assert raw["source"] == dump.SOURCE
    options = raw["options"]
    assert isinstance(options, list)
    assert raw["fingerprint"] == dump.fingerprint(options)
    table = load_option_table(version)
    # from_json keeps every field the generator wrote
    assert table.fingerprint == raw["fingerprint"]
    assert OptionTable.from_json(table.to_json()).to_json() == table.to_json()
    assert len(table.options) > 150 and table.by_option("--model-path") is not None


def test_option_counts_grow_across_releases() -> None:
    counts = [len(load_option_table(v).options) for v in SHIPPED]
    assert counts == sorted(counts), dict(zip(SHIPPED, counts, strict=True))


@pytest.mark.parametrize("version", SHIPPED)
def test_the_graph_batch_size_is_spelled_as_each_release_spells_it(version: str) -> None:
    table = load_option_table(version)
    names = set(table.option_strings)
    for flag in (GRAPH, OLD_GRAPH):
        spelled = versions.spelling_in(flag, table)
        # 0.5.14 on: the current name, even where the old one is still a deprecated alias
        if GRAPH in names:
            assert spelled == (flag if flag in names else GRAPH)
        elif OLD_GRAPH in names:  # 0.5.10 and older
            assert spelled == OLD_GRAPH
        else:
            assert spelled is None
    if OLD_GRAPH in names and GRAPH in names:
        assert table.is_deprecated(OLD_GRAPH)
        assert table.by_option(OLD_GRAPH).dest == table.by_option(GRAPH).dest  # type: ignore[union-attr]


def test_the_rename_is_read_from_sglangs_own_deprecation_marks() -> None:
    assert set(versions.same_setting(GRAPH)) >= {GRAPH, OLD_GRAPH}
    assert versions.same_setting(OLD_GRAPH)[0] == OLD_GRAPH
    assert versions.same_setting("--model-path") == ("--model-path",)
    have_old = versions.releases_with(OLD_GRAPH)
    have_new = versions.releases_with(GRAPH)
    assert "0.5.10" in have_old and "0.5.10" not in have_new
    assert "0.5.23" in have_new and "0.5.23" not in have_old
    assert set(have_old) | set(have_new) >= {"0.5.6", "0.5.10", "0.5.14", "0.5.20",
                                             "0.5.23"} & set(SHIPPED)


def test_nearest_shipped_table() -> None:
    assert versions.nearest_shipped("0.5.23") == "0.5.23"
    # flags added in 0.5.22 cannot be in 0.5.21
    assert versions.nearest_shipped("0.5.21") == "0.5.20"
    assert versions.nearest_shipped("0.5.23+cu129") == "0.5.23"
    assert versions.nearest_shipped("9.0") == SHIPPED[-1]
    assert versions.nearest_shipped("0.0.1") == SHIPPED[0]


def test_a_post_release_is_served_by_its_base_table() -> None:
    choice = versions.table_for("0.5.23.post1")
    assert choice.table.version == "0.5.23"
    assert choice.note is not None and "0.5.23.post1" in choice.note \
           and "base release" in choice.note


def test_table_for_says_which_table_it_uses() -> None:
    assert versions.table_for("0.5.20").note is None
    unset = versions.table_for(None)
    assert unset.table.version == SHIPPED[-1] and unset.note is not None and "not set" in unset.note
    between = versions.table_for("0.5.21")
    assert between.table.version == "0.5.20"
    assert between.note is not None and "nearest shipped" in between.note \
           and "0.5.21" in between.note
    with pytest.raises(LookupError, match="not an SGLang release"):
        versions.table_for("latest")


def test_describe_runs_of_releases() -> None:
    assert versions.describe(SHIPPED) == f"{SHIPPED[0]}–{SHIPPED[-1]}"
    assert versions.describe([SHIPPED[0]]) == SHIPPED[0]
    assert versions.describe([SHIPPED[0], SHIPPED[-1]]) == f"{SHIPPED[0]}, {SHIPPED[-1]}"
    assert versions.describe([]) == "none shipped"


def test_releases_accepting_a_backend_choice() -> None:
    accepting = versions.releases_accepting("--attention-backend", "fa3")
    assert "0.5.23" in accepting
    assert versions.releases_accepting("--attention-backend", "no-such-backend") == ()


def test_the_default_table_is_the_newest_shipped() -> None:
    assert load_option_table().version == SHIPPED[-1] == load_option_table(None).version
