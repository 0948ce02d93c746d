from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from objectives.records import ErrorKind
from objectives.usage import (
    ABSOLUTE_MAX_TOKENS,
    MAX_TOKENS_SLACK,
    UsageProblem,
    chunk_tokens,
    count_problem,
    token_limit,
)


def test_cumulative_counts_become_per_chunk_deltas_and_empty_chunks_vanish() -> None:
    # role chunk (0 tokens), prefill token, two speculative steps, repeated usage-only chunk
    result = chunk_tokens([1.0, 2.0, 3.0, 4.0, 5.0], [0, 1, 4, 6, 6], [0, 2, 9, 5, 0])
    assert result.exact
    assert result.times == (2.0, 3.0, 4.0)
    assert result.tokens == (1, 3, 2)
    assert result.total == 6


def test_final_total_only_is_spread_by_text_length_keeping_the_total() -> None:
    result = chunk_tokens([1.0, 2.0, 3.0, 4.0], [None, None, None, 10], [1, 6, 3, 0])
    assert not result.exact
    assert result.total == 10
    assert result.times == (1.0, 2.0, 3.0)
    assert result.tokens[1] > result.tokens[2] >= result.tokens[0] >= 1


@given(st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=30),
       st.integers(min_value=1, max_value=500))
def test_spreading_always_adds_up_to_the_servers_total(chars: list[int], total: int) -> None:
    if not any(chars):
        chars = [*chars, 1]
    times = [float(i) for i in range(len(chars) + 1)]
    result = chunk_tokens(times, [None] * len(chars) + [total], [*chars, 0])
    assert result.total == total
    assert all(n > 0 for n in result.tokens)
    assert list(result.times) == sorted(result.times)


@pytest.mark.parametrize(("cumulative", "chars", "kind"), [
    ([None, None], [3, 4], ErrorKind.MISSING_USAGE),
    ([2, 1], [1, 1], ErrorKind.BAD_USAGE),
    ([-1], [1], ErrorKind.BAD_USAGE),
    (["3"], [1], ErrorKind.BAD_USAGE),
    ([0, 0], [5, 5], ErrorKind.BAD_USAGE),
])
def test_impossible_or_missing_counts_are_reported_by_kind(cumulative: list, chars: list[int],
                                                           kind: ErrorKind) -> None:
    with pytest.raises(UsageProblem) as info:
        chunk_tokens([float(i) for i in range(len(chars))], cumulative, chars)
    assert info.value.kind is kind


def test_a_zero_token_answer_is_valid_and_empty() -> None:
    result = chunk_tokens([1.0], [0], [0])
    assert result.tokens == () and result.exact


@pytest.mark.parametrize("value", [2 * 10**8, 10**30, -1, 3.5, float("nan"), float("inf"), True,
                                   "12", None, [3]])
def test_implausible_counts_are_named_problems(value: object) -> None:
    assert count_problem(value, token_limit(512)) is not None


def test_the_limit_is_max_tokens_plus_a_small_slack() -> None:
    limit = token_limit(512)
    assert limit == 512 + MAX_TOKENS_SLACK
    assert count_problem(limit, limit) is None and count_problem(0, limit) is None
    assert count_problem(limit + 1, limit) is not None
    assert token_limit(None) == ABSOLUTE_MAX_TOKENS


def test_a_count_beyond_the_limit_is_bad_usage_not_a_record_of_it() -> None:
    with pytest.raises(UsageProblem) as info:
        chunk_tokens([1.0, 2.0], [1, 2 * 10**8], [1, 1], limit=token_limit(16))
    assert info.value.kind is ErrorKind.BAD_USAGE and "200000000" in str(info.value)
    assert chunk_tokens([1.0, 2.0], [1, 48], [1, 1], limit=token_limit(16)).total == 48
