from __future__ import annotations

import pytest

from tuner.sglang.options import (
    AmbiguousOption,
    OptionTable,
    UnknownOption,
    available_versions,
    load_option_table,
)


@pytest.fixture(scope="module")
def table() -> OptionTable:
    return load_option_table("0.5.23")


def test_shipped_versions_include_0_5_23() -> None:
    assert "0.5.23" in available_versions()


def test_table_has_all_531_options(table: OptionTable) -> None:
    assert len(table.options) == 531
    assert table.lookup("--speculative-num-steps").dest == "speculative_num_steps"


def test_alias_resolves_to_canonical_name(table: OptionTable) -> None:
    assert table.lookup("--tensor-parallel-size").name == "--tp-size"
    assert table.lookup("model").name == "--model-path"


def test_cuda_graph_max_bs_is_ambiguous_like_sglang(table: OptionTable) -> None:
    with pytest.raises(AmbiguousOption) as info:
        table.lookup("--cuda-graph-max-bs")
    assert info.value.matches == ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"]


def test_unique_prefix_is_refused_without_abbreviations(table: OptionTable) -> None:
    with pytest.raises(UnknownOption) as info:
        table.lookup("--mem-fraction")
    assert info.value.suggestions == ["--mem-fraction-static"]
    assert table.lookup("--mem-fraction", allow_abbrev=True).name == "--mem-fraction-static"


def test_typo_gets_close_suggestion(table: OptionTable) -> None:
    with pytest.raises(UnknownOption) as info:
        table.lookup("--speculative-num-step")
    assert "--speculative-num-steps" in info.value.suggestions


def test_check_value_types_and_choices(table: OptionTable) -> None:
    assert table.check_value(table.lookup("--tp-size"), 4) is None
    assert "integer" in (table.check_value(table.lookup("--tp-size"), "four") or "")
    assert "integer" in (table.check_value(table.lookup("--tp-size"), 4.5) or "")
    assert "does not accept" in (table.check_value(table.lookup("--attention-backend"), "fa9")
                                 or "")
    assert "switch" in (table.check_value(table.lookup("--enable-metrics"), "yes") or "")
    assert table.check_value(table.lookup("--cuda-graph-bs-decode"), [1, 2, 4]) is None


def test_parser_with_abbreviations_exits_2_on_ambiguity(table: OptionTable, capsys) -> None:
    parser = table.build_parser(allow_abbrev=True)
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--cuda-graph-max-bs", "16"])
    assert info.value.code == 2
    assert "ambiguous option: --cuda-graph-max-bs could match" in capsys.readouterr().err


def test_parser_types_and_boolean_pairs(table: OptionTable) -> None:
    parser = table.build_parser(allow_abbrev=False)
    ns = parser.parse_args(["--model-path", "m", "--mem-fraction-static", "0.85",
                            "--no-enable-tf32-matmul",
                            "--cuda-graph-bs-decode", "1", "2", "4", "--enable-metrics"])
    assert ns.mem_fraction_static == 0.85
    assert ns.enable_tf32_matmul is False
    assert ns.cuda_graph_bs_decode == [1, 2, 4]
    assert ns.enable_metrics is True
    assert ns.speculative_num_steps is None
