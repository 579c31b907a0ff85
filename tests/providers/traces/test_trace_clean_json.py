"""A trace's lines are parsed once: a line that cannot hold a control character is not walked a second time, and
what the readers get is exactly what walking every line gave (docs/performance.md#traces)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokrace.providers.model.printable import deep_without_controls
from tokrace.providers.traces import reader_tools
from tokrace.providers.traces.read import read_file
from tokrace.providers.traces.reader_tools import clean_json, may_hold_controls


def walked(raw: bytes) -> object:
    """What every line became before: parsed, then walked."""
    return deep_without_controls(json.loads(raw))


HOSTILE = [
    b'{"a": "\\u001b]52;c;aGk=\\u0007"}',  # an escape making ESC and BEL
    b'{"a": "back\\bspace", "b": "form\\ffeed"}',
    b'{"\\u001b[2J": 1}',  # in a key
    b'{"a": ["x", {"b": "\\u009b31m"}]}',  # a C1 CSI, nested
    '{"a": "raw C1 \u0085 and \u009b"}'.encode(),  # C1 controls written as they are (UTF-8 \xc2\x85)
    b'{"a": "raw DEL \x7f"}',
    '{"a": "esc"}'.encode("utf-16"),  # a byte-order mark: json.loads reads UTF-16
    '{"a": "\\u001b"}'.encode("utf-16-le"),  # no mark, zero bytes: UTF-16 too
    '{"a": "\\u001b"}'.encode("utf-32"),
    '\ufeff{"a": "\\u0007"}'.encode(),  # a UTF-8 byte-order mark
    b'{"a": "keeps\\n\\t\\r layout", "b": "caf\xc3\xa9 \\u00e9"}',
    b'{"a": "\\\\u001b is text, not an escape"}',
]


@pytest.mark.parametrize("raw", HOSTILE)
def test_a_line_is_what_walking_it_gave(raw: bytes) -> None:
    assert clean_json(raw) == walked(raw)


def test_only_lines_that_may_hold_a_control_character_are_walked() -> None:
    assert not may_hold_controls(b'{"a": "plain text\\nwith \\"quotes\\" and \\\\ a path", "n": 1}')
    assert not may_hold_controls('{"a": "caf\u00e9, \u4e2d\u6587, \U0001f600"}'.encode())
    for raw in HOSTILE[:-3]:
        assert may_hold_controls(raw), raw


TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]) | st.sampled_from(
    ["\x1b", "\x07", "\x08", "\x0c", "\x7f", "\x85", "\x9b", "\n", "\t", "\r", "\\", '"', "\u2028", "\x00"]))
JSON = st.recursive(st.none() | st.booleans() | st.integers() | TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(TEXT, JSON, max_size=5), ascii_only=st.booleans())
def test_any_line_is_what_walking_it_gave(value: dict[str, object], ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert clean_json(raw) == walked(raw)


def test_a_clean_file_is_parsed_once_and_a_hostile_line_is_still_made_safe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[object] = []

    def counting(value: object) -> object:
        walks.append(value)
        return deep_without_controls(value)

    monkeypatch.setattr(reader_tools, "deep_without_controls", counting)

    def line(uuid: str, text: str) -> str:
        return json.dumps({"type": "user", "uuid": uuid, "sessionId": "s", "timestamp": "2026-05-01T12:00:00Z",
                           "message": {"role": "user", "content": text}})

    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(line(f"u{i}", "Fix the failing tests\nplease") for i in range(50)) + "\n")
    found = read_file(path)
    assert found.format == "claude-code" and walks == []
    path.write_text(line("u0", "Fix it") + "\n" + json.dumps({
        "type": "assistant", "uuid": "a\x1b[2J", "parentUuid": "u0", "sessionId": "s\x1b]52;c;aGk=\x07",
        "timestamp": "2026-05-01T12:00:02Z", "message": {"id": "m1", "model": "m\x9b31m", "content": []}}) + "\n")
    found = read_file(path)
    assert len(walks) == 2  # only the hostile line: once in the head format detection reads, once by the reader
    assert found.traces and "\x1b" not in found.traces[0].session and "\x9b" not in repr(found.traces[0])
