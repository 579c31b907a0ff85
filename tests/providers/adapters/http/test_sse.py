"""The SSE parser follows the WHATWG rules over raw bytes, however the bytes are cut into chunks."""

from __future__ import annotations

import pytest

from tokrace.providers.adapters.http.sse import EventTooLarge, SSEEvent, SSEParser


def parse(*chunks: bytes) -> list[SSEEvent]:
    parser = SSEParser()
    return [event for chunk in chunks for event in parser.feed(chunk)]


def datas(*chunks: bytes) -> list[str]:
    return [e.data for e in parse(*chunks)]


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_every_line_ending_ends_lines_and_events(eol: bytes) -> None:
    stream = b"data: a" + eol + eol + b"data: b" + eol + eol
    assert datas(stream) == ["a", "b"]


def test_crlf_split_across_chunks_is_one_line_ending_not_a_blank_line() -> None:
    assert datas(b"data: a\r", b"\ndata: b\r\n\r\n") == ["a\nb"]


def test_cr_at_a_chunk_end_dispatches_at_once_without_waiting_for_the_next_chunk() -> None:
    parser = SSEParser()
    assert [e.data for e in parser.feed(b"data: now\r\r")] == ["now"]
    assert parser.feed(b"\n") == []  # the LF completing the CRLF is not another blank line


def test_every_byte_split_gives_the_same_events() -> None:
    stream = b'\xef\xbb\xbfevent: x\r\ndata: {"a": 1}\r\n: keep-alive\r\n\r\ndata: two\rdata: lines\r\r'
    whole = parse(stream)
    assert [(e.event, e.data) for e in whole] == [("x", '{"a": 1}'), ("message", "two\nlines")]
    for cut in range(len(stream)):
        assert parse(stream[:cut], stream[cut:]) == whole
    assert parse(*(stream[i : i + 1] for i in range(len(stream)))) == whole


def test_unicode_line_separators_inside_json_do_not_split_the_data() -> None:
    payload = '{"text": "a\u2028b\u2029c\x85d\x0be\x0cf"}'
    assert datas(f"data: {payload}\n\n".encode()) == [payload]


def test_comments_and_keep_alives_are_ignored() -> None:
    assert datas(b": OPENROUTER PROCESSING\n\n:ping\ndata: x\n\n") == ["x"]


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert datas(b"data: one\ndata:two\ndata\ndata:  three\n\n") == ["one\ntwo\n\n three"]


def test_one_leading_space_is_removed_from_a_value() -> None:
    assert datas(b"data:x\n\ndata: x\n\ndata:  x\n\n") == ["x", "x", " x"]


def test_only_one_bom_is_stripped_even_when_split() -> None:
    assert datas(b"\xef\xbb", b"\xbfdata: a\n\n") == ["a"]
    bom_twice = parse(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n")
    assert bom_twice == []  # the second BOM makes the field name "\ufeffdata", which is ignored


def test_an_event_without_data_is_not_dispatched_and_resets_its_type() -> None:
    assert [(e.event, e.data) for e in parse(b"event: ping\n\ndata: x\n\n")] == [("message", "x")]


def test_unterminated_last_event_is_dropped_and_reported_pending() -> None:
    parser = SSEParser()
    assert [e.data for e in parser.feed(b"data: whole\n\ndata: cut")] == ["whole"]
    assert parser.pending


def test_no_pending_after_a_clean_end() -> None:
    parser = SSEParser()
    parser.feed(b"data: x\n\n")
    assert not parser.pending


def test_event_id_persists_until_changed_and_ignores_nul() -> None:
    events = parse(b"id: 7\ndata: a\n\ndata: b\n\nid: 8\0\ndata: c\n\nid\ndata: d\n\n")
    assert [e.id for e in events] == ["7", "7", "7", ""]


def test_retry_takes_digits_only() -> None:
    parser = SSEParser()
    parser.feed(b"retry: 1500\n\nretry: 2s\n\n")
    assert parser.retry_ms == 1500


def test_unknown_fields_and_field_names_are_case_sensitive() -> None:
    assert datas(b"Data: no\nfoo: bar\ndata: yes\n\n") == ["yes"]


def test_bytes_that_are_not_utf8_decode_to_replacement_and_mark_the_event() -> None:
    events = parse(b"data: ok\n\ndata: bad \xff\xfe\n\ndata: ok again\n\n")
    assert [e.valid_utf8 for e in events] == [True, False, True]
    assert events[1].data == "bad \ufffd\ufffd"


def test_a_multibyte_character_split_across_chunks_is_whole() -> None:
    snowman = "☃".encode()
    assert datas(b"data: " + snowman[:1], snowman[1:] + b"\n\n") == ["☃"]


LF_STREAM = (b'data: {"a": 1}\n\nevent: delta\nid: 9\ndata: {"b": "\xe2\x98\x83"}\n\n: keep-alive\n\n'
             b"data:one\ndata\ndata:  two\n\nretry: 250\nevent: none\n\ndata: bad \xff\n\nData: no\nid: 3\0\n"
             b"data: last\n\n")
LF_EVENTS = [("message", '{"a": 1}', "", True), ("delta", '{"b": "☃"}', "9", True),
             ("message", "one\n\n two", "9", True), ("message", "bad \ufffd", "9", False),
             ("message", "last", "9", True)]


def fields(events: list[SSEEvent]) -> list[tuple[str, str, str, bool]]:
    return [(e.event, e.data, e.id, e.valid_utf8) for e in events]


def test_lf_only_chunks_give_the_same_events_at_every_pair_of_cuts() -> None:
    """After the first chunk, chunks without a CR take the LF-only path: cut anywhere, even mid-character, into
    three chunks or one byte at a time, they decode as the whole stream does."""
    assert fields(parse(LF_STREAM)) == LF_EVENTS
    for first in range(len(LF_STREAM)):
        for second in range(first, len(LF_STREAM)):
            got = parse(LF_STREAM[:first], LF_STREAM[first:second], LF_STREAM[second:])
            assert fields(got) == LF_EVENTS, (first, second)
    assert fields(parse(*(LF_STREAM[i : i + 1] for i in range(len(LF_STREAM))))) == LF_EVENTS


def test_chunks_with_and_without_cr_mix_and_give_the_same_events() -> None:
    stream = b"data: a\r\n\r\ndata: b\n\ndata: c\r\rdata: d\ndata: e\r\n\ndata: f\n\n"
    whole = [e.data for e in parse(stream)]
    assert whole == ["a", "b", "c", "d\ne", "f"]
    for cut in range(len(stream)):
        for size in (1, 2, 3, 7):
            head, rest = stream[:cut], stream[cut:]
            assert datas(head, *(rest[i : i + size] for i in range(0, len(rest), size))) == whole, (cut, size)


def test_the_size_limit_holds_on_lf_only_chunks() -> None:
    growing = SSEParser(max_event_bytes=1000)
    growing.feed(b"data: start\n\n")
    with pytest.raises(EventTooLarge):
        for _ in range(20):
            growing.feed(b"data: " + b"x" * 93 + b"\n")
    endless = SSEParser(max_event_bytes=1000)
    endless.feed(b"data: start\n\n")
    endless.feed(b"data: " + b"x" * 900)
    with pytest.raises(EventTooLarge):
        endless.feed(b"x" * 200)
    fine = SSEParser(max_event_bytes=1000)
    fine.feed(b"data: start\n\n")
    assert len([e for _ in range(20) for e in fine.feed(b"data: " + b"x" * 93 + b"\n\n")]) == 20


def test_one_huge_data_line_is_held_once_as_bytes_and_once_as_text() -> None:
    """Its pieces were joined, the join sliced past ``data: ``, then decoded: four copies of it at once."""
    import tracemalloc

    size = 4_000_000
    body = b"data: " + b"y" * size + b"\n\n"
    chunks = [body[at:at + 65_536] for at in range(0, len(body), 65_536)]
    parser = SSEParser()
    tracemalloc.start()
    try:
        events = [event for chunk in chunks for event in parser.feed(chunk)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [len(e.data) for e in events] == [size]
    assert peak < 2.3 * size, peak
