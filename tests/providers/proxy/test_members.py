"""A big request's few top-level members, read a piece at a time: what ``json.loads`` gives, however the body is laid
out, ``None`` whenever ``json.loads`` refuses it, and never more than a bounded amount of parsing between pieces."""

from __future__ import annotations

import asyncio
import codecs
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proxying import Upstream1, anthropic_sse, sse_response

from tokrace.providers.model.events import Done, Request, Segment, Usage
from tokrace.providers.proxy import Routes, Upstream, meter
from tokrace.providers.proxy import members as members_module
from tokrace.providers.proxy.members import PIECE, REACH, RUN, SCAN, members
from tokrace.providers.proxy.session import ProxySession
from tokrace.providers.recording import read_recording

WANTED = frozenset({"model", "metadata", "stream", "prompt_cache_key"})


def read(body: bytes | list[bytes]) -> tuple[dict[str, Any] | None, list[int]]:
    """The reader's result and what each piece said it worked through."""
    reading, pieces = members(body, WANTED), []
    while True:
        try:
            pieces.append(next(reading))
        except StopIteration as done:
            return done.value, pieces


def expected(body: bytes) -> dict[str, Any] | None:
    """What the measuring read before: ``json.loads``' members, ``None`` when it refuses the body."""
    try:
        whole = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return {k: v for k, v in whole.items() if k in WANTED} if isinstance(whole, dict) else {}


@contextmanager
def small_pieces(piece: int = 32, run: int = 40, window: int = 4, depth: int = 3) -> Iterator[None]:
    """Every body read piecewise, in pieces, runs and windows of its text small enough that a few-hundred-byte body
    takes every path."""
    with mock.patch.multiple(members_module, WHOLE_BYTES=0, PIECE=piece, RUN=run, REACH=run // 2,
                             FIRST_WINDOW=window, MAX_DEPTH=depth):
        yield


def same(body: bytes) -> None:
    got, _ = read(body)
    assert repr(got) == repr(expected(body))  # (repr: NaN is itself, -0.0 is not 0, and the order counts)


# -- JSON text as an agent, or a hostile client, could write it -------------------------------------------------------

SPACE = st.text(" \t\n\r", max_size=3)
CHARS = st.characters(codec="utf-8") | st.sampled_from('"\\/\b\f\n\r\t\x00\x1f\x7f\u2028é日\U0001F600\ud800\udfff')


@st.composite
def string(draw: st.DrawFn) -> str:
    """A JSON string, each character raw, escaped short or as ``\\uXXXX`` (either case; surrogates as pairs, and
    lone, as json.loads takes them)."""
    out = ['"']
    for char in draw(st.lists(CHARS, max_size=12)):
        code = ord(char)
        how = draw(st.integers(0, 3))
        short = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                 "\t": "\\t"}.get(char)
        if code < 0x20 or char in '"\\' or how == 0 or 0xD800 <= code < 0xE000:
            if short and how < 2:
                out.append(short)
            elif code > 0xFFFF:
                high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
                out.append(f"\\u{high:04x}\\u{low:04X}")
            else:
                out.append(f"\\u{code:04x}" if how % 2 else f"\\u{code:04X}")
        elif how == 1 and code > 0xFFFF:
            high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
            out.append(f"\\u{high:04x}\\u{low:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


NUMBER = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.from_regex(r"-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,20})?([eE][-+]?[0-9]{1,3})?", fullmatch=True),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-0", "0.0"]),
)
KEY = st.sampled_from(sorted(WANTED)) | string()
LEAF = NUMBER | string() | st.sampled_from(["true", "false", "null"])


def container(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    def obj(members: list[tuple[str, str, tuple[str, str, str, str]]]) -> str:
        return "{" + ",".join(f"{a}{k}{b}:{c}{v}{d}" for k, v, (a, b, c, d) in members) + "}"

    gaps = st.tuples(SPACE, SPACE, SPACE, SPACE)
    key = st.sampled_from(['"model"', '"stream"', '"metadata"', '"prompt_cache_key"', '"messages"']) | string()
    return (st.lists(st.tuples(key, inner, gaps), max_size=5).map(obj)
            | st.lists(st.tuples(SPACE, inner, SPACE), max_size=6).map(
                lambda items: "[" + ",".join(a + v + b for a, v, b in items) + "]"))


VALUE = st.recursive(LEAF, container, max_leaves=30)
DOCUMENT = st.tuples(SPACE, container(VALUE) | VALUE, SPACE).map("".join)
ENCODING = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"])


def encoded(text: str, encoding: str) -> bytes:
    return text.encode(encoding, "surrogatepass")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=DOCUMENT, encoding=ENCODING, cuts=st.lists(st.integers(0, 10_000), max_size=5))
def test_what_json_loads_gives_is_what_the_piecewise_reading_gives(text: str, encoding: str, cuts: list[int]) -> None:
    body = encoded(text, encoding)
    at = sorted({cut % (len(body) + 1) for cut in cuts} | {0, len(body)})
    pieces = [body[a:b] for a, b in pairwise(at)]  # (as it came off the socket)
    with small_pieces():
        same(body)
        assert repr(read(pieces)[0]) == repr(expected(body))


WIDE = st.sampled_from(["\U0001F916", "\U0001F600", "é", "日", "\u2028", "\udfff", "a", " ", "\\u00e9",
                        "\\ud83e\\udd16", "\\ud800", '\\"', "\\\\"])
"""A string's inside as Claude Code's prompts have it: characters one to four bytes long in UTF-8, and escapes."""


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wide=st.lists(WIDE, max_size=40).map("".join), text=DOCUMENT, encoding=ENCODING, run=st.integers(32, 64),
       cuts=st.lists(st.integers(0, 10_000), max_size=5))
def test_wide_characters_read_alike_across_every_piece_and_window(wide: str, text: str, encoding: str, run: int,
                                                                   cuts: list[int]) -> None:
    body = encoded(f'{{"system": "{wide}", "x": {text}, "model": "{wide}", "{wide}": ["{wide}"]}}', encoding)
    at = sorted({cut % (len(body) + 1) for cut in cuts} | {0, len(body)})
    with small_pieces(run=run):
        same(body)
        assert repr(read([body[a:b] for a, b in pairwise(at)])[0]) == repr(expected(body))


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16"])
def test_each_character_read_alike_whichever_byte_a_piece_or_a_window_ends_at(encoding: str) -> None:
    text = '{"system": "\U0001F916 é日\\ud83e\\udd16 x\U0001F600", "model": "é\U0001F916日", "stream": true}'
    body = encoded(text, encoding)
    for run in range(32, 48):  # (a window decodes half a run of bytes: its end at every offset of a character)
        with small_pieces(run=run):
            for cut in range(len(body) + 1):
                assert repr(read([body[:cut], body[cut:]])[0]) == repr(expected(body)), (run, cut)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=DOCUMENT, cut=st.integers(0, 10_000), garbage=st.sampled_from(["", "x", "}", "]", ",", '"', "\\", "\x00",
                                                                            " 1", "{}", "nul", "\ud800"]),
       how=st.sampled_from(["truncate", "append", "insert", "delete", "replace"]))
def test_a_damaged_body_is_not_json_exactly_when_json_loads_refuses_it(text: str, cut: int, garbage: str,
                                                                         how: str) -> None:
    at = cut % (len(text) + 1)
    damaged = {"truncate": text[:at], "append": text + garbage, "insert": text[:at] + garbage + text[at:],
               "delete": text[:at] + text[at + 1:], "replace": text[:at] + garbage + text[at + 1:]}[how]
    with small_pieces():
        same(encoded(damaged, "utf-8"))


@pytest.mark.parametrize("body", [
    b'{"model": "a", "x": [1], "model": "b", "stream": true, "stream": false}',
    b'{"metadata": {"a": 1, "a": 2, "b": [3, {"a": 4, "a": 5}]}, "model": "m"}',
    b'  {"model": "m"}  \r\n',
    b'{"model": NaN, "stream": Infinity, "metadata": -Infinity}',
    b'{"model": "\\ud83d\\ude00 \\ud83d \\ude00 \\uDBFF\\uDFFF \\ud800\\u0041"}',
    b'{"model": "\xed\xa0\x80 raw"}',  # a surrogate in UTF-8: json.loads decodes bytes with surrogatepass
    b'\xef\xbb\xbf{"model": "with a BOM"}',
    b'\xef\xbb\xbf\xef\xbb\xbf{"model": "two BOMs"}',
    b'[1, {"model": "not a member of an object body"}]', b'"text"', b"12", b"null",
    b'{"model": "m",}', b'{"model": "m"} x', b'{"model" "m"}', b'{"model": "m", "a": [1 2]}',
    b'{"a": "unterminated', b'{"a": [1, 2}', b"\xff\xfe\xfa", b"", b"   ", b"{'a': 1}", b'{"a": "\x01"}',
    b'{"a": "\\x"}', b'{"a": "\\u12g4"}', b'{"a": "\\ud800\\u12g4"}', b'{"a": 01}', b'{"a": 1.}', b'{"a": -}',
    b'{"a": tru}', b'{"a": nan}', b'{"a": 1e}', b'{"model": "m"}\x00', b'{"model": "m"}]', b'{"a" : 1 , }',
    b'{"a": ' + b"1" * 5000 + b"}",  # past the interpreter's digits limit: json.loads refuses it
    b'{"model": ' + b"1" * 4000 + b"}", b'{"stream": 1.' + b"0" * 300 + b"}",
    b'{"model": [' + b"[" * 50 + b"]" * 50 + b"]}", b'{"x": ' + b"[" * 60 + b"]" * 60 + b', "model": "deep"}',
])
def test_awkward_and_hostile_bodies_read_as_json_loads_reads_them(body: bytes) -> None:
    with small_pieces():
        same(body)
    with small_pieces(piece=64, run=512, window=64, depth=16):
        same(body)


@pytest.mark.parametrize("body", [
    b"[" * 100_000 + b"]" * 100_000,  # deeper than the C parser goes: json.loads raises RecursionError
    b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b', "model": "m"}',
    b'{"model": "m", "pad": "' + b"x" * 2_000_000 + b'"}', b'{"model": "m", "pad": "' + b"x" * 2_000_000,
    b'{"model": "' + b"\\n\\u00e9\\\\" * 200_000 + b'"}', b'{"model": "m", "pad": "' + b"x" * 500_000 + b'\x1f"}',
    b"{" + b" " * 1_000_000 + b'"model": "spaced"' + b"\n" * 1_000_000 + b"}",
    b'{"model": "m", "n": ' + b"7" * 600_000 + b"}", b'{"model": "m", "n": 0.' + b"7" * 600_000 + b"}",
    json.dumps({"model": "m", "messages": [{"role": "user", "content": "é\U0001F600 \"q\"\n" * 50}] * 2_000},
               ensure_ascii=False).encode("utf-16"),
])
def test_big_hostile_bodies_read_as_json_loads_reads_them(body: bytes) -> None:
    same(body)


# -- the bound ------------------------------------------------------------------------------------------------------


class Counted:
    """The reader's C calls, counted: how much each piece worked through (a character parsed counts one, a character
    scanned an eighth: decoded, joined into the window, or in a run of whitespace or of a string)."""

    def __init__(self) -> None:
        self.piece = 0
        self.pieces: list[int] = []
        self.joined = self.decoded = 0
        """The most characters one join made, and the most bytes one decode took."""

    def join(self, parts: Any) -> str:
        joined = "".join(parts)
        self.joined = max(self.joined, len(joined))
        self.piece += len(joined) // SCAN
        return joined

    def parse(self, call: Callable[[str, int], Any], weight: int = 1) -> Callable[[str, int], Any]:
        def counted(text: str, at: int) -> Any:
            assert at == 0  # (a slice, not a place in the whole text)
            self.piece += len(text) if weight == 1 else (len(text) - 1) // weight + 1  # (less its closing quote)
            return call(text, at)
        return counted

    def pattern(self, pattern: re.Pattern[str]) -> Any:
        counter = self

        class Pattern:
            def match(self, text: str, pos: int, endpos: int) -> re.Match[str] | None:
                found = pattern.match(text, pos, endpos)
                counter.piece += ((found.end() if found else pos) - pos) // SCAN + 1
                return found
        return Pattern()

    def decoder(self, make: Callable[[str], Any]) -> Callable[[str], Any]:
        def made(encoding: str) -> Any:
            inner = make(encoding)

            def decoding(errors: str) -> Any:
                decoder = inner(errors)
                decode = decoder.decode

                def counted(data: bytes, final: bool = False) -> str:
                    self.decoded = max(self.decoded, len(data))
                    self.piece += len(data) // SCAN
                    return str(decode(data, final))
                decoder.decode = counted
                return decoder
            return decoding
        return made

    def read(self, body: bytes) -> dict[str, Any] | None:
        with mock.patch.multiple(members_module, _SCAN=self.parse(members_module._SCAN),
                                 _UNESCAPE=self.parse(members_module._UNESCAPE, SCAN),
                                 _SPACE=self.pattern(members_module._SPACE),
                                 _STRING_RUN=self.pattern(members_module._STRING_RUN), _JOIN=self.join), \
                mock.patch.object(members_module.codecs, "getincrementaldecoder",
                                  self.decoder(codecs.getincrementaldecoder)):
            reading = members(body, WANTED)
            while True:
                try:
                    next(reading)
                except StopIteration as done:
                    self.pieces.append(self.piece)
                    return done.value  # type: ignore[no-any-return]
                self.pieces.append(self.piece)
                self.piece = 0


def agent_body(messages: int = 400) -> bytes:
    """A request as Claude Code sends one: a system prompt, tools with schemas, a long conversation with tool calls
    and their results (escapes, code, non-ASCII), its session in the metadata."""
    tool = {"name": "Read", "description": "Reads a file. " * 40, "input_schema": {
        "type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 60} for i in range(20)}}}
    turns: list[dict[str, Any]] = []
    for n in range(messages):
        turns.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Looking at part {n} 🤖"},
            {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"path": f"src/{n}.py"}}]})
        turns.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content":
                      'def f(x):\n    return "é\\t" + x  # ✓\n' * (5 + n % 50)}]})
    turns.append({"role": "user", "content": "a pasted log\n" + "line\twith\ttabs \"quoted\"\n" * 40_000})
    return json.dumps({"model": "claude-sonnet-4", "max_tokens": 32000, "stream": True,
                       "system": [{"type": "text", "text": "You are Claude Code. " * 2000}],
                       "tools": [tool] * 30, "messages": turns,
                       "metadata": {"user_id": "user_abc_account_1_session_77"}}, ensure_ascii=False).encode()


@pytest.mark.parametrize("body", [
    agent_body(),
    b'{"model": "m", "stream": true, "pad": "' + b"x" * (4 * 1024 * 1024) + b'"}',
    b"{" + b" " * 600_000 + b'"model": "spaced"}',
    b'{"model": [' + b"[" * 12 + b'"' + b"\\u00e9" * 100_000 + b'"' + b"]" * 12 + b"]}",
    json.dumps({"messages": [{"content": "x" * 200}] * 5_000, "model": "m"}).encode(),
    json.dumps({"model": "claude-sonnet-4", "system": [{"type": "text", "text": "You are Claude Code 🤖. " * 50}],
                "messages": [{"role": "user", "content": f"line {n} é " + "x" * 200} for n in range(18_000)],
                "stream": True}, ensure_ascii=False).encode(),
], ids=["agent", "one-big-string", "long-whitespace", "nested-escapes", "many-elements", "emoji-first"])
def test_no_piece_parses_more_than_twice_a_piece(body: bytes) -> None:
    counted = Counted()
    got = counted.read(body)
    assert repr(got) == repr(expected(body))
    assert sum(counted.pieces) >= len(body) // SCAN  # every character went through a counted call
    assert max(counted.pieces) <= 2 * PIECE
    assert len(counted.pieces) > len(body) // (2 * PIECE * SCAN)
    assert counted.joined <= RUN and counted.decoded <= REACH  # (no whole text: a window at a time)


def test_a_body_up_to_whole_bytes_is_parsed_at_once() -> None:
    body = json.dumps({"model": "m", "messages": ["x" * 100] * 100}).encode()
    assert len(body) <= members_module.WHOLE_BYTES
    assert read(body) == ({"model": "m"}, [])


# -- what the measuring finds ---------------------------------------------------------------------------------------


def big_request(session: str, turn: int) -> bytes:
    """A Claude Code request of about 700 KB: its session in the metadata, its context long."""
    return json.dumps({"model": "claude-x", "stream": True, "max_tokens": 5, "messages": [
        {"role": "user", "content": f"turn {turn} " + 'context é🤖 "q"\n' * 40_000}],
        "metadata": {"user_id": f"user_a_account_b_session_{session}"}}, ensure_ascii=False).encode()


async def measured(tmp_path: Path, name: str) -> dict[Any, list[tuple[Any, ...]]]:
    """Four big calls through a proxy session, as recorded: a tool call, another session's call, the turn after the
    tool and that turn again (a retry: the same body)."""
    bodies = [big_request("one", 1), big_request("two", 1), big_request("one", 2), big_request("one", 2)]
    answers = [sse_response(anthropic_sse(stop)) for stop in ("tool_use", "end_turn", "end_turn", "end_turn")]
    path = tmp_path / f"{name}.jsonl"
    async with Upstream1(lambda request: answers.pop(0)) as up:
        session = ProxySession(Routes.single(Upstream.parse(up.url)), path)
        await session.start()
        try:
            async with httpx.AsyncClient(base_url=session.server.url, timeout=30) as client:
                for body in bodies:
                    await client.post("/v1/messages", content=body)
                    await asyncio.sleep(0.02)
        finally:
            await session.close()
    return {lane: [(type(e).__name__, getattr(e, "seg", None), getattr(e, "model", None), getattr(e, "input", None),
                    getattr(e, "output", None), getattr(e, "finish_reason", None)) for e in events
                   if isinstance(e, Request | Segment | Usage | Done)]
            for lane, events in read_recording(path).events.items()}


async def test_big_bodies_give_the_sessions_tokens_and_retries_the_whole_parse_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(big_request("one", 1)) > members_module.WHOLE_BYTES
    piecewise = await measured(tmp_path, "piecewise")
    monkeypatch.setattr(members_module, "WHOLE_BYTES", 1 << 30)  # read whole, as json.loads read them before
    monkeypatch.setattr(meter, "WHOLE_BYTES", 1 << 30)
    whole = await measured(tmp_path, "whole")
    assert piecewise == whole
    assert len(piecewise) == 2  # the two sessions, each on its lane
    one = max(piecewise.values(), key=len)
    assert [e[1] for e in one if e[0] == "Segment"] == ["tool", "retry"]
    assert [(e[3], e[4]) for e in one if e[0] == "Usage"] == [(7, 1), (7, 3)] * 3  # (its start, its end)
    assert {e[2] for e in one if e[0] == "Request"} == {"claude-x"}


def test_a_big_request_opens_its_call_over_many_steps_of_the_queue_with_the_facts_of_the_whole_parse() -> None:
    from tokrace.providers.proxy.http1 import parse_head

    body = big_request("77", 1)
    head = parse_head(b"POST /v1/messages HTTP/1.1\r\nuser-agent: claude-cli\r\n\r\n")
    opened: list[meter.CallMeter] = []

    def begin(call: meter.CallMeter) -> Callable[[Any], None]:
        opened.append(call)
        return lambda event: None

    call = meter.CallMeter("POST", lambda: 0.0, begin, lambda c: None, work=meter.MeterQueue())
    call.request(head, 0.0, Upstream.parse("http://127.0.0.1:1"))
    for at in range(0, len(body), 65536):
        call.request_body(body[at:at + 65536])
    steps = 1
    while not call.step("sent", 0.0, None):
        steps += 1
        assert not opened  # (the call opens once its request is read)
    assert steps > len(body) // (2 * PIECE * SCAN) and opened == [call]
    with mock.patch.object(members_module, "WHOLE_BYTES", 1 << 30), mock.patch.object(meter, "WHOLE_BYTES", 1 << 30):
        assert call.facts == meter.request_facts(head, body, False)
    assert call.facts.model == "claude-x" and call.facts.session == "session_77" and call.facts.stream


@pytest.mark.parametrize("backlog", [1 << 30, 1_000_000])
async def test_the_measuring_reads_on_only_while_more_bodies_wait_than_it_keeps(
        backlog: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from tokrace.providers.proxy.http1 import parse_head

    monkeypatch.setattr(meter, "BACKLOG_BYTES", backlog)
    ticks = iter(range(1 << 40))
    monkeypatch.setattr(meter.time, "perf_counter", lambda: next(ticks) * 1.0)  # each look: past the slice's end
    head = parse_head(b"POST /v1/messages HTTP/1.1\r\n\r\n")
    queue, opened = meter.MeterQueue(), []
    calls = [meter.CallMeter("POST", lambda: 0.0, lambda c: opened.append(c) or (lambda e: None), lambda c: None,
                             work=queue) for _ in range(3)]
    for n, call in enumerate(calls):
        call.request(head, 0.0, Upstream.parse("http://127.0.0.1:1"))
        call.request_body(big_request(str(n), 1))
    assert queue.waiting == 3 * len(big_request("0", 1))
    for call in calls:
        call.sent(0.0, False, None)
    over = queue.waiting > backlog
    queue._work()  # one slice
    if not over:
        assert opened == []  # a piece, and the loop looks at its sockets
    else:  # read on until no more than the backlog waits: the first call, and the second's body taken up
        assert opened == [calls[0]] and queue.waiting <= backlog
    queue.drain()
    assert opened == calls and queue.waiting == 0
