from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from objectives.sse import MAX_EVENT_BYTES, SSEDecoder, SSEError

STREAM = (
    b": a comment line\n"
    b"event: message\n"
    b'data: {"a": 1}\n\n'
    b'data: {"b":\n'
    b"data: 2}\n\n"
    b"id: 7\r\n"
    b'data: {"c": 3}\r\n\r\n'
    b"data: [DONE]\n\n"
)
EXPECTED = [b'{"a": 1}', b'{"b":\n2}', b'{"c": 3}', b"[DONE]"]


def test_whole_stream_gives_each_data_payload() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(STREAM) + decoder.close() == EXPECTED


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_into_socket_reads_gives_the_same_events(cuts: list[int]) -> None:
    decoder = SSEDecoder()
    events: list[bytes] = []
    bounds = [0, *sorted(cuts), len(STREAM)]
    for start, end in itertools.pairwise(bounds):
        events += decoder.feed(STREAM[start:end])
    assert events + decoder.close() == EXPECTED


def test_data_without_space_after_colon() -> None:
    assert SSEDecoder().feed(b"data:x\n\n") == [b"x"]


def test_close_keeps_complete_lines_but_drops_a_cut_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: complete\n") == []
    assert decoder.close() == [b"complete"]
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"cut in the mid') == []
    assert decoder.close() == []


def test_an_endless_line_is_refused_instead_of_buffered() -> None:
    decoder = SSEDecoder()
    with pytest.raises(SSEError):
        decoder.feed(b"data: " + b"x" * (MAX_EVENT_BYTES + 1))
