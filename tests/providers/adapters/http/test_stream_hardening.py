"""Hostile streams: huge and endless lines, servers that never stop, responses that are not event streams, chunks
of the wrong shape. Each ends its lane with one clear error, in bounded time and memory, never a Python error."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import ROOT
from serving import chunks, provider, stream_turn

from tokrace.providers.adapters.http.anthropic import AnthropicDecoder
from tokrace.providers.adapters.http.decoder import StreamDecoder, StreamProblem, decode
from tokrace.providers.adapters.http.openai_chat import ChatDecoder, OpenAIChatProvider
from tokrace.providers.adapters.http.openai_responses import ResponsesDecoder
from tokrace.providers.adapters.http.sse import EventTooLarge, SSEParser
from tokrace.providers.model.events import Done, Error, Event
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.timing.clock import LaneClock, VirtualClock
from tokrace.tui.main import main


def test_the_sse_parser_is_linear_4_mb_in_64_byte_chunks_well_under_a_second() -> None:
    line = b"data: " + json.dumps({"text": "y" * (4 * 1024 * 1024)}).encode() + b"\n\n"
    parser = SSEParser()
    began = time.thread_time()  # this thread's CPU time: other processes on a busy machine do not count
    events = [e for i in range(0, len(line), 64) for e in parser.feed(line[i : i + 64])]
    took = time.thread_time() - began
    assert len(events) == 1 and len(events[0].data) == len(line) - 8
    assert took < 1.0, f"{took:.2f} s"


def test_one_event_larger_than_the_cap_is_refused_whether_one_line_or_many() -> None:
    with pytest.raises(EventTooLarge):
        SSEParser(max_event_bytes=1000).feed(b"data: " + b"x" * 2000)
    parser = SSEParser(max_event_bytes=1000)
    with pytest.raises(EventTooLarge):
        for _ in range(100):
            parser.feed(b"data: " + b"x" * 50 + b"\n")  # data lines, never the blank line that dispatches them
    fine = SSEParser(max_event_bytes=1000)
    for _ in range(100):
        assert len(fine.feed(b"data: " + b"x" * 50 + b"\n\n")) == 1


def chat_tier(url: str = "http://api.test/v1", **options: object) -> TierSpec:
    return TierSpec(name="lane", provider="openai", model="m", base_url=url, options={"max_retries": 0, **options})


async def through(handler: httpx.MockTransport, request: TurnRequest | None = None, **options: object) -> list[Event]:
    return await stream_turn(chat_tier(**options), request, transport=handler)


async def collect(events: AsyncIterator[Event]) -> list[Event]:
    return [e async for e in events]


def last_error(events: list[Event]) -> Error:
    error = events[-1]
    assert isinstance(error, Error), events[-5:]
    return error


async def test_a_line_that_never_ends_is_ended_at_the_event_cap() -> None:
    async def endless() -> AsyncIterator[bytes]:
        yield b'data: {"choices": [{"delta": {"content": "'
        for _ in range(20):
            yield b"z" * (1024 * 1024)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=endless())

    error = last_error(await through(httpx.MockTransport(handler)))
    assert error.error == "protocol" and "one event larger than 16 MB" in error.message


@pytest.mark.parametrize(("status", "location"), [(301, "https://api.example.com/v2"), (307, "/elsewhere"),
                                                  (302, None)])
async def test_a_redirect_is_reported_with_its_target_and_never_followed(status: int, location: str | None) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        headers = {"location": location} if location else {}
        return httpx.Response(status, headers=headers, content=b"moved")

    error = last_error(await through(httpx.MockTransport(handler)))
    assert len(seen) == 1 and error.status == status
    assert f"HTTP {status} from api.test: redirected" in error.message
    assert "does not follow redirects" in error.message and "set base_url" in error.message
    if location:
        assert f"to {location}" in error.message


async def test_a_web_page_under_200_is_reported_as_what_it_is() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/html; charset=utf-8"},
                              content=b"<html><body>Welcome to nginx!</body></html>")

    error = last_error(await through(httpx.MockTransport(handler)))
    assert error.status == 200 and "sent text/html instead of an event stream" in error.message
    assert "check base_url" in error.message


async def test_a_json_error_under_200_is_reported_with_the_providers_message() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"error": {"message": "model 'm' not found", "type": "not_found"}})

    error = last_error(await through(httpx.MockTransport(handler)))
    assert "sent application/json instead of an event stream: model 'm' not found" in error.message


@pytest.mark.parametrize(("body", "said"), [
    (b'{"error": {"message": "no such model"}}', "was not an event stream: no such model"),
    (b"<html>Bad gateway</html>", "was not an event stream: <html>Bad gateway</html>"),
])
async def test_a_body_without_a_content_type_and_without_events_is_reported_as_what_it_began_with(
        body: bytes, said: str) -> None:
    async def stream() -> AsyncIterator[bytes]:
        yield body

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=stream())

    error = last_error(await through(httpx.MockTransport(handler)))
    assert error.error == "protocol" and "HTTP 200 from api.test (no content type)" in error.message
    assert said in error.message


async def test_a_stream_of_keep_alives_that_ends_is_still_an_incomplete_stream() -> None:
    async def stream() -> AsyncIterator[bytes]:
        yield b": ping\n\n: ping\n\n"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream())

    error = last_error(await through(httpx.MockTransport(handler)))
    assert error.error == "incomplete"


@pytest.mark.parametrize("chunk", [
    {"choices": 5}, {"choices": [{"delta": 5}]}, {"choices": [{"delta": {"tool_calls": 7}}]},
    {"choices": [{"delta": {"tool_calls": [5]}}]},
    {"choices": [{"delta": {}}], "x_groq": 3},
    {"choices": [], "usage": {"completion_tokens": float("inf")}},
])
async def test_a_chunk_with_fields_of_the_wrong_type_ends_the_lane_with_an_excerpt(chunk: object) -> None:
    body = f"data: {json.dumps(chunk)}\n\n".encode()

    async def stream() -> AsyncIterator[bytes]:
        yield body

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream())

    error = last_error(await through(httpx.MockTransport(handler)))
    assert error.error == "protocol"
    assert error.message.startswith("the server sent a chunk tokrace cannot read: '{")
    assert "Error" not in error.message  # never Python's own words (TypeError, AttributeError...)


class Endless(BaseHTTPRequestHandler):
    """Streams valid Chat deltas forever (``/fast``: as fast as it can; else every 10 ms)."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        chunk = json.dumps({"choices": [{"index": 0, "delta": {"content": "more "}}]})
        try:
            while True:
                self.wfile.write(f"data: {chunk}\n\n".encode())
                self.wfile.flush()
                if "/fast" not in self.path:
                    time.sleep(0.01)
        except OSError:
            pass  # the client hung up, as it should


@pytest.fixture
def endless_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_a_server_streaming_past_max_tokens_forever_ends_the_lane(endless_server: str) -> None:
    events = await stream_turn(chat_tier(endless_server + "/fast/v1"), TurnRequest("Go.", max_tokens=10))
    error = last_error(events)
    assert error.error == "runaway" and "far past max_tokens (297 text chunks for max_tokens 10)" in error.message
    assert len(chunks(events)) == 296


@pytest.mark.parametrize("one_line", [False, True], ids=["deltas", "one-endless-line"])
async def test_a_turn_still_streaming_at_turn_timeout_s_is_ended_there(one_line: bool) -> None:
    """A server that streams valid deltas (or one line that never ends) far longer than the turn may take, a piece
    every 10 ms of virtual time: the turn ends at the first piece past turn_timeout_s."""
    clock = VirtualClock()
    chunk = json.dumps({"choices": [{"index": 0, "delta": {"content": "more "}}]})

    async def endless() -> AsyncIterator[bytes]:
        if one_line:
            yield b'data: {"choices": [{"delta": {"content": "'
        for _ in range(1000):  # ten seconds, never ending the stream
            await clock.sleep_until(clock.now() + 0.01)
            yield b"z" if one_line else f"data: {chunk}\n\n".encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=endless())

    prov = provider(chat_tier(turn_timeout_s=0.4), transport=httpx.MockTransport(handler))
    await prov.prepare()
    try:
        lane = LaneClock(clock, clock.now())
        events = await clock.drive(collect(prov.stream(TurnRequest("Go.", max_tokens=100_000), lane)))
    finally:
        await prov.aclose()
    error = last_error(events)
    assert error.error == "timeout" and "still streaming after 0.4 s" in error.message
    assert "raise turn_timeout_s" in error.message
    assert 0.4 < error.t < 0.4 + 0.01 + 1e-9 and error.t == clock.now()  # at once: the first piece past it


def test_bench_against_a_server_that_never_stops_ends_with_the_table(
        endless_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tokrace.toml"
    config.write_text(f'[[tiers]]\nname = "endless"\nprovider = "openai"\nmodel = "m"\n'
                      f'base_url = "{endless_server}/v1"\nturn_timeout_s = 0.3\n', encoding="utf-8")
    code = main(["bench", "--config", str(config), "--no-record", "--json", "-"])
    out = capsys.readouterr().out
    run = json.loads(out)["tiers"][0]["runs"][0]
    assert code == 1 and run["ok"] is False and "still streaming after 0.3 s" in run["error"]


def test_the_default_turn_timeout_is_documented() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert "| `turn_timeout_s` | 1800 | the longest one turn may take |" in page
    assert OpenAIChatProvider(chat_tier()).turn_timeout == 1800.0


# -- property tests: the three decoders under hostile input --------------------------------------------------

_scalars = (st.none() | st.booleans() | st.integers(-3, 3) | st.floats(width=16) | st.text(max_size=6)
            | st.sampled_from([float("inf"), float("-inf"), 10**30]))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["type", "delta", "text", "index", "choices", "content", "tool_calls", "function", "arguments",
                     "name", "id", "usage", "error", "response", "item", "item_id", "message", "content_block",
                     "partial_json", "thinking", "stop_reason", "finish_reason", "x_groq", "output_tokens",
                     "completion_tokens", "input_tokens", "prompt_tokens", "time_info", "timings"]),
    inner, max_size=4), max_leaves=12)
_kinds = st.sampled_from([
    "response.output_text.delta", "response.function_call_arguments.delta", "response.output_item.added",
    "response.output_item.done", "response.function_call_arguments.done", "response.completed", "response.failed",
    "response.created", "error", "content_block_delta", "content_block_start", "content_block_stop",
    "message_start", "message_delta", "message_stop"])


@st.composite
def hostile_streams(draw: st.DrawFn) -> bytes:
    events = []
    for _ in range(draw(st.integers(1, 6))):
        obj = draw(_values)
        if isinstance(obj, dict) and draw(st.booleans()):
            obj["type"] = draw(_kinds)
        data = json.dumps(obj) if draw(st.integers(0, 9)) else draw(st.text(max_size=10))
        events.append(f"data: {data}\n\n")
    body = "".join(events).encode()
    return body[: draw(st.integers(0, len(body)))] if draw(st.booleans()) else body


@pytest.mark.parametrize("make", [ChatDecoder, ResponsesDecoder, AnthropicDecoder])
@settings(max_examples=150, deadline=None)
@given(body=hostile_streams(), cuts=st.lists(st.integers(1, 40), max_size=8))
def test_a_decoder_under_random_splits_truncations_and_wrong_types_raises_only_its_lane_error(
        make: type[StreamDecoder], body: bytes, cuts: list[int]) -> None:
    decoder = make(None)
    parser = SSEParser()
    pieces, pos = [], 0
    for cut in cuts:
        pieces.append(body[pos : pos + cut])
        pos += cut
    pieces.append(body[pos:])
    for piece in pieces:
        for sse in parser.feed(piece):
            try:
                events = decode(decoder, sse, 1.0)
            except StreamProblem as problem:
                assert problem.kind == "protocol" and problem.message
                return
            assert all(isinstance(e, Event.__args__) for e in events)  # type: ignore[attr-defined]
            if events and isinstance(events[-1], Done | Error):
                return
    assert all(isinstance(e, Done | Error) for e in decoder.end(2.0))


_JSONISH = st.sampled_from(['{"a": 1}', "[1, 2]", " {}", "{} ", "{}\n", "{}x", "{} {}", "\ufeff{}", "NaN", "-",
                            '"text"', "1e999", '{"a": [1, {"b": null}]', "", "  ", "nul", "true", "[", "}", "\x00"])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(_JSONISH, st.text(max_size=5)), max_size=4))
def test_load_json_reads_what_json_loads_reads_and_refuses_what_it_refuses(parts: list[str]) -> None:
    """The scanner's fast path returns exactly what ``json.loads`` returns, and anything else it refuses (white
    space around the value, something after it) goes to ``json.loads`` as before."""
    from tokrace.providers.adapters.http.decoder import load_json
    from tokrace.providers.adapters.http.sse import SSEEvent

    text = "".join(parts)
    try:
        expected: object = json.loads(text)
    except json.JSONDecodeError:
        with pytest.raises(StreamProblem, match="malformed JSON"):
            load_json(SSEEvent("message", text))
        return
    got = load_json(SSEEvent("message", text))
    assert repr(got) == repr(expected)  # repr: NaN is not equal to itself
