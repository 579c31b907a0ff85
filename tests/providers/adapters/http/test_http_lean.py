"""The lean HTTP/1.1 transport: one write per request, chunked bodies decoded across any split of the bytes,
connections kept alive (and not kept when they cannot be reused), httpx's timeouts and errors; and the request's
start: built before the turn starts, connected and written before the event loop runs again."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from serving import Taken, fast_source, provider, tier

from tokrace.providers.adapters.http.backend import StampedBackend, _connect
from tokrace.providers.adapters.http.eager import eager
from tokrace.providers.adapters.http.transport import ChunkedDecoder, LeanTransport, _whole_chunks
from tokrace.providers.model.events import Done, Request, Segment
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.serve import ServeServer

BODY = b"data: one\n\ndata: two\n\n"
CHUNKED = b"4\r\ndata\r\n7;ext=1\r\n: one\n\n\r\na\r\ndata: two\n\r\n0\r\nx-trailer: 1\r\n\r\n"
CHUNKED_DATA = b"data: one\n\ndata: two\n"

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Scripted:
    """A loopback server whose every connection runs ``handler``; counts connections and requests."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Scripted:
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                await self.handler(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        self.server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1/x"

    async def request(self, reader: asyncio.StreamReader) -> bool:
        """Read one request (head and content-length body); False when the client closed instead."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        self.requests.append(head + await reader.readexactly(length))
        return True


@asynccontextmanager
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on the lean transport; closing it closes its connections and then its backend (the
    transport does not own the backend: a provider closes both, as this does)."""
    backend = StampedBackend()
    try:
        async with httpx.AsyncClient(transport=LeanTransport(backend), timeout=httpx.Timeout(5.0)) as http:
            yield http
    finally:
        backend.close()


async def test_chunked_decoding_gives_the_same_data_however_the_bytes_are_split() -> None:
    for cut in range(1, len(CHUNKED) + 1):
        decoder = ChunkedDecoder()
        got = b"".join(decoder.feed(CHUNKED[i:i + cut]) for i in range(0, len(CHUNKED), cut))
        assert got == CHUNKED_DATA, cut
        assert decoder.done and not decoder.extra
    for split in range(len(CHUNKED)):  # every split in two, including inside "\r\n"
        decoder = ChunkedDecoder()
        assert decoder.feed(CHUNKED[:split]) + decoder.feed(CHUNKED[split:]) == CHUNKED_DATA
        assert decoder.done


def _framed(*datas: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(d), d) for d in datas)


def test_a_read_of_whole_chunks_gives_the_data_a_chunk_at_a_time_would() -> None:
    datas = [b"data: one\n\n", b"two\r\nwith a line break\r\n", b"x" * 300, b"\r\n", b"A" * 26, b"end"]
    whole = _framed(*datas)
    for cut in (1, 2, 3, len(datas)):  # reads of whole chunks, one or several, each in one split
        decoder = ChunkedDecoder()
        got = [decoder.feed(_framed(*datas[i:i + cut])) for i in range(0, len(datas), cut)]
        assert b"".join(got) == b"".join(datas) and not decoder.done
        assert decoder.feed(b"0\r\n\r\n") == b"" and decoder.done
    assert _whole_chunks(_framed(datas[0], datas[2])) == datas[0] + datas[2]  # one split for all of them
    assert _whole_chunks(whole) is None  # a chunk's data holds a line break: a chunk at a time
    decoder = ChunkedDecoder()  # the last chunk read with the others
    assert decoder.feed(whole + b"0\r\n\r\n") == b"".join(datas) and decoder.done and not decoder.extra
    decoder = ChunkedDecoder()  # a read that ends inside a chunk, just after a line break in its data
    assert decoder.feed(whole[:whole.index(b"with") + len(b"with a line break\r\n")]) + decoder.feed(
        whole[whole.index(b"with") + len(b"with a line break\r\n"):]) == b"".join(datas)
    decoder = ChunkedDecoder()
    assert decoder.feed(b"1A;ext=1\r\n" + b"A" * 26 + b"\r\n") == b"A" * 26  # an extension: step by step
    assert ChunkedDecoder().feed(b" 3 \r\nabc\r\n") == b"abc"  # spaces around a size, as before
    for bad in (b"0x3\r\nabc\r\n", b"+3\r\nabc\r\n", b"1_0\r\n" + b"a" * 16 + b"\r\n"):
        with pytest.raises(ValueError, match="bad chunk size"):
            ChunkedDecoder().feed(bad)


def test_chunked_decoding_refuses_bad_framing_and_notes_what_follows_the_end() -> None:
    with pytest.raises(ValueError, match="bad chunk size"):
        ChunkedDecoder().feed(b"zz\r\nabc\r\n")
    with pytest.raises(ValueError, match="longer than its size"):
        ChunkedDecoder().feed(b"2\r\nabc\r\n")
    with pytest.raises(ValueError, match="too long"):
        ChunkedDecoder().feed(b"1" * 5000)
    decoder = ChunkedDecoder()
    assert decoder.feed(b"1\r\na\r\n0\r\n\r\nHTTP/1.1 200") == b"a"
    assert decoder.done and decoder.extra == b"HTTP/1.1 200"


async def test_a_request_is_one_write_and_a_chunked_answer_split_in_many_packets_arrives_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    taken = Taken(monkeypatch)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.request(reader):
            head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            writer.write(head)
            sent = len(head)
            for i in range(0, len(CHUNKED), 3):  # a packet every 3 bytes: sizes and CRLFs cut anywhere
                writer.write(CHUNKED[i:i + 3])
                await writer.drain()
                sent += len(CHUNKED[i:i + 3])  # each packet read off the socket before the next is written
                await taken.until(lambda sent=sent: taken.bytes() == sent, "the client's read of the packet")

    async with Scripted(handler) as server, client() as http:
        names: list[str] = []

        async def trace(name: str, info: dict[str, Any]) -> None:
            names.append(name)

        pieces = []
        async with http.stream("POST", server.url, json={"a": 1}, extensions={"trace": trace}) as response:
            assert response.status_code == 200
            stream = response.extensions["network_stream"]
            async for piece in response.aiter_raw():
                pieces.append(piece)
                assert stream.read_at is not None
        assert b"".join(pieces) == CHUNKED_DATA
        assert len(pieces) > 1  # handed out as the packets came, not once at the end
        assert server.requests[0].startswith(b"POST /v1/x HTTP/1.1\r\n")
        assert server.requests[0].endswith(b'\r\n\r\n{"a":1}')
        assert names == ["connection.connect_tcp.started", "connection.connect_tcp.complete",
                         "http11.send_request_body.started", "http11.send_request_body.complete",
                         "http11.receive_response_headers.started", "http11.receive_response_headers.complete"]


async def test_a_connection_is_reused_after_a_whole_answer_and_not_after_one_cut_short() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.request(reader):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(BODY) + BODY)
            await writer.drain()

    async with Scripted(handler) as server, client() as http:
        for _ in range(3):
            response = await http.post(server.url, json={})
            assert response.content == BODY
        assert server.connections == 1 and len(server.requests) == 3
        async with http.stream("POST", server.url, json={}) as response:
            pass  # closed before its body was read: the connection cannot carry another request
        assert (await http.post(server.url, json={})).content == BODY
        assert server.connections == 2


async def test_a_connection_the_server_closes_or_marks_close_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = Taken(monkeypatch)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.request(reader)
        close = b"connection: close\r\n" if server.connections % 2 else b""
        writer.write(b"HTTP/1.1 200 OK\r\n" + close + b"content-length: 2\r\n\r\nok")
        await writer.drain()
        if not close:
            await asyncio.sleep(0)  # then hang up while the client holds the connection idle

    async with Scripted(handler) as server, client() as http:
        for _ in range(4):
            assert (await http.post(server.url, json={})).content == b"ok"
            await taken.until(taken.all_ended, "the client's side of the hang-up")
        assert server.connections == 4


async def test_a_body_without_length_runs_until_the_server_closes() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n" + BODY)
        await writer.drain()

    async with Scripted(handler) as server, client() as http:
        assert (await http.post(server.url, json={})).content == BODY


async def test_a_stream_cut_short_or_no_answer_at_all_is_httpxs_protocol_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.request(reader)
        if len(server.requests) == 1:
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\ndata\r\n")
            await writer.drain()

    async with Scripted(handler) as server, client() as http:
        async with http.stream("POST", server.url, json={}) as response:
            with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
                async for _ in response.aiter_raw():
                    pass
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await http.post(server.url, json={})


async def test_a_head_that_never_comes_is_httpxs_read_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.request(reader)
        await reader.read()

    async with Scripted(handler) as server, client() as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post(server.url, json={}, timeout=httpx.Timeout(5.0, read=0.05))


async def test_refused_and_bad_headers_are_httpx_errors() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    async with client() as http:
        with pytest.raises(httpx.ConnectError, match="refused"):
            await http.post(f"http://127.0.0.1:{port}/", json={})

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.request(reader):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    async with Scripted(handler) as server, client() as http:
        with pytest.raises(httpx.LocalProtocolError):
            await http.post(server.url, json={}, headers={"x-a": "b\r\nx-injected: 1"})
        assert (await http.post(server.url, json={})).content == b"ok"  # on the connection opened for it
        assert server.requests == [server.requests[0]] and b"injected" not in server.requests[0]
        assert server.connections == 1


async def test_a_loopback_connect_and_the_request_need_no_pass_of_the_event_loop() -> None:
    loop = asyncio.get_running_loop()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    try:
        sock = socket.socket()
        sock.setblocking(False)
        step = _connect(loop, sock, listener.getsockname(), None)
        with pytest.raises(StopIteration):  # done in its first step: the handshake completed inside connect()
            step.send(None)
        sock.close()

        names: list[str] = []

        async def trace(name: str, info: dict[str, Any]) -> None:
            names.append(name)

        async with client() as http:
            request = http.build_request("POST", f"http://127.0.0.1:{listener.getsockname()[1]}/", json={},
                                         extensions={"trace": trace, "timeout": {"read": 0.05}})
            sending = eager(http.send(request))
            # no await since: the connection is open and the request written
            assert "http11.send_request_body.complete" in names
            assert not sending.done()
            with pytest.raises(httpx.ReadTimeout):  # the rest went on in a task of its own
                await sending
    finally:
        listener.close()


async def test_eager_hands_over_results_and_errors_like_a_task() -> None:
    async def value() -> int:
        return 7

    async def fails() -> int:
        raise ValueError("no")

    async def waits() -> int:
        await asyncio.sleep(0)
        return 8

    assert await eager(value()) == 7
    with pytest.raises(ValueError):
        await eager(fails())
    assert await eager(waits()) == 8
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def hangs() -> None:
        await never

    task = eager(hangs())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


class Ticks:
    """A clock that moves one second at every reading: which reading came first is plain."""

    virtual = True

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        self.t += 1.0
        return self.t

    async def sleep_until(self, t: float) -> float:
        self.t = max(self.t, t)
        return self.t


async def test_the_turn_starts_after_the_request_is_built_and_the_request_event_still_comes_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Ticks()
    built: list[float] = []
    build = httpx.AsyncClient.build_request

    def build_request(self: httpx.AsyncClient, *args: Any, **kwargs: Any) -> httpx.Request:
        request = build(self, *args, **kwargs)
        built.append(clock.now())
        return request

    async with ServeServer(fast_source()) as server:
        prov = provider(tier(server, "openai"))
        await prov.prepare()
        monkeypatch.setattr(httpx.AsyncClient, "build_request", build_request)
        try:
            events = [e async for e in prov.stream(TurnRequest("hi", max_tokens=5), clock)]
        finally:
            await prov.aclose()
    assert isinstance(events[0], Request) and isinstance(events[-1], Done)
    connect = next(e for e in events if isinstance(e, Segment) and e.seg == "connect")
    assert len(built) == 1 and built[0] < events[0].t == connect.start


async def test_a_cookie_the_server_sets_goes_back_with_the_next_turn() -> None:
    sse = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
           b"data: [DONE]\n\n")

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.request(reader):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nset-cookie: lb=7; Path=/\r\n"
                         b"content-length: %d\r\n\r\n" % len(sse) + sse)
            await writer.drain()

    async with Scripted(handler) as server:
        spec = TierSpec(name="lane", provider="openai", model="m", base_url=server.url.removesuffix("/x"))
        prov = provider(spec)
        await prov.prepare()
        try:
            for _ in range(2):
                events = [e async for e in prov.stream(TurnRequest("hi", max_tokens=5), Ticks())]
                assert isinstance(events[-1], Done)
        finally:
            await prov.aclose()
    assert b"cookie: lb=7" not in server.requests[0].lower()
    assert b"cookie: lb=7" in server.requests[1].lower()


def test_a_read_cut_inside_a_chunk_takes_its_whole_chunks_in_one_split_and_only_the_cut_one_step_by_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """More bytes than a read takes (a 20,000 tok/s stream, a late look) cut reads inside a chunk: the whole chunks
    before and after the cut still go in one split, only the chunk the cut falls in a line at a time; the data is
    what decoding a chunk at a time gives, wherever the cut falls."""
    from tokrace.providers.adapters.http import transport as lean_module

    datas = [b"data: {\"n\": %d, \"text\": \" word\"}\n\n" % i for i in range(60)]
    stream = _framed(*datas) + b"0\r\n\r\n"
    biggest = max(map(len, datas)) + 8  # a chunk and its framing
    split: list[int] = []
    whole_chunks = lean_module._whole_chunks

    def noted(data: bytes) -> bytes | None:
        found = whole_chunks(data)
        if found is not None:
            split.append(len(data))
        return found

    monkeypatch.setattr(lean_module, "_whole_chunks", noted)
    body = stream[:-5]
    for cut in range(1, len(body)):
        decoder = ChunkedDecoder()
        split.clear()
        got = decoder.feed(body[:cut]) + decoder.feed(body[cut:])
        assert got == b"".join(datas) and not decoder.done, cut
        assert sum(split) >= len(body) - 2 * biggest, (cut, split)  # all but the chunk cut (and its neighbour)
        assert decoder.feed(b"0\r\n\r\n") == b"" and decoder.done
    for cut in range(1, len(stream)):  # the last chunk too, every cut
        decoder = ChunkedDecoder()
        assert decoder.feed(stream[:cut]) + decoder.feed(stream[cut:]) == b"".join(datas) and decoder.done, cut
