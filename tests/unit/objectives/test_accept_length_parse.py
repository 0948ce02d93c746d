from __future__ import annotations

from objectives.accept_length import GENERATION_TOKENS, VERIFY_CALLS, parse_counters, plausible

EXPOSITION = """\
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="qwen",dp_rank="0"} 1200.0
sglang:generation_tokens_total{model_name="qwen",dp_rank="1"} 800.0
sglang:generation_tokens_created{model_name="qwen"} 1.7e9
sglang:spec_verify_calls_total{model_name="a model, with {braces}"} 500
sglang:gen_throughput{model_name="qwen"} NaN
"""


def test_counters_are_summed_over_label_sets() -> None:
    counters = parse_counters(EXPOSITION,
                              (GENERATION_TOKENS, VERIFY_CALLS, "sglang:gen_throughput"))
    assert counters[GENERATION_TOKENS] == 2000.0
    assert counters[VERIFY_CALLS] == 500.0
    assert "sglang:gen_throughput" not in counters  # NaN is no value


def test_missing_counters_are_absent_not_zero() -> None:
    assert parse_counters("sglang:num_requests_total 3\n", (VERIFY_CALLS,)) == {}


def test_only_finite_positive_accept_lengths_are_plausible() -> None:
    assert plausible(3.2) == 3.2
    for value in (float("nan"), float("inf"), float("-inf"), -1.0, 0.0, 1e9):
        assert plausible(value) is None, value
