from __future__ import annotations

from objectives.accept_length import GENERATION_TOKENS, VERIFY_CALLS, parse_counters

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
    counters = parse_counters(EXPOSITION, (GENERATION_TOKENS, VERIFY_CALLS, "sglang:gen_throughput"))
    assert counters[GENERATION_TOKENS] == 2000.0
    assert counters[VERIFY_CALLS] == 500.0
    assert "sglang:gen_throughput" not in counters  # NaN is no value


def test_missing_counters_are_absent_not_zero() -> None:
    assert parse_counters("sglang:num_requests_total 3\n", (VERIFY_CALLS,)) == {}
