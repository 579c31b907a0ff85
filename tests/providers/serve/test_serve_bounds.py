"""``tokrace serve`` bounded: a body past ``--max-body`` is 413 before it is read, a head of too many or too long
headers is 431, JSON nested past reading is 400 (no traceback), a body sent a byte per chunk is joined whole, and
a refused request closes only its own connection."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from serving import fast_source

from tokrace.providers.serve import Limits, ServeServer
from tokrace.tui.cli.parser import build_parser

BODY = {"model": "m", "stream": True, "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}


async def exchange(server: ServeServer, data: bytes, *, then: bytes = b"") -> tuple[int, dict[str, object], bytes]:
    """Send ``data`` raw, read the answer's status and JSON body; ``then`` is sent after the answer (and must find
    the connection closed)."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(data)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    body = json.loads(await reader.readexactly(length))
    rest = await asyncio.wait_for(reader.read(), 5)  # the server closed the connection
    writer.close()
    return status, body, rest


def post(body: bytes, *extra: str, length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    lines = ["POST /v1/chat/completions HTTP/1.1", "host: x", f"content-length: {size}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def test_a_body_larger_than_max_body_is_413_before_it_is_read() -> None:
    async with ServeServer(fast_source()) as server:
        status, body, rest = await exchange(server, post(b"", length=629_145_610))
    assert status == 413 and rest == b""
    message = body["error"]["message"]  # type: ignore[index]
    assert "629,145,610 bytes" in message and "33,554,432" in message and "--max-body" in message


async def test_a_chunked_body_growing_past_max_body_is_413() -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
    async with ServeServer(fast_source(), limits=Limits(max_body=1000)) as server:
        status, body, _ = await exchange(server, head + b"400\r\n" + b"x" * 1024 + b"\r\n")
    assert status == 413 and "1,024 bytes" in body["error"]["message"]  # type: ignore[index]


async def test_a_body_sent_a_byte_per_chunk_is_joined_whole() -> None:
    data = json.dumps(BODY).encode()
    chunked = b"".join(b"1\r\n" + data[i:i + 1] + b"\r\n" for i in range(len(data))) + b"0\r\n\r\n"
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    async with ServeServer(fast_source()) as server:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(head + chunked)
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200") and b"[DONE]" in answer


@pytest.mark.parametrize("headers", [
    [f"x-h{i}: v" for i in range(101)],
    ["x-big: " + "v" * 70_000],
])
async def test_too_many_or_too_long_headers_are_431(headers: list[str]) -> None:
    async with ServeServer(fast_source()) as server:
        status, body, _ = await exchange(server, post(b"{}", *headers))
    assert status == 431 and "header" in body["error"]["message"]  # type: ignore[index]


async def test_json_nested_past_reading_is_a_400_and_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    async with ServeServer(fast_source()) as server, httpx.AsyncClient(base_url=server.url) as client:
        nested = await client.post("/v1/chat/completions", content=b"[" * 100_000)
        after = await client.post("/v1/chat/completions", json=BODY)
    assert nested.status_code == 400 and "nests too deeply" in nested.json()["error"]["message"]
    assert after.status_code == 200
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("line", [b"GARBAGE\r\n\r\n", b"POST / HTTP/1.1\r\ncontent-length: ten\r\n\r\n"])
async def test_a_malformed_request_is_a_400(line: bytes) -> None:
    async with ServeServer(fast_source()) as server:
        status, _, _ = await exchange(server, line)
    assert status == 400


def test_max_body_is_an_option_in_mb() -> None:
    args = build_parser().parse_args(["serve", "--max-body", "2"])
    assert args.max_body == 2 * 1024 * 1024
    assert build_parser().parse_args(["serve"]).max_body == 32 * 1024 * 1024


class _Sleeps:
    """``asyncio`` as serve's request reader sees it, its sleeps noted (and made passes of the loop)."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def __getattr__(self, name: str) -> object:
        return getattr(asyncio, name)

    async def sleep(self, delay: float) -> None:
        self.asked.append(delay)
        await asyncio.sleep(0)


@pytest.mark.parametrize(("size", "chunks", "rests"), [(1, 6400, 100), (65_536, 640, 0)])
async def test_tiny_chunks_coming_faster_than_parsed_rest_the_reading_and_useful_ones_never_do(
        monkeypatch: pytest.MonkeyPatch, size: int, chunks: int, rests: int) -> None:
    """The root of a normal request's late first token during a byte-per-chunk upload: the upload's parsing kept the
    server busy on its core, and a busy process is scheduled behind every other one on a loaded machine. Now it
    hands the loop back every 64 chunks, and rests a millisecond when those were tiny: a small share of a core."""
    from tokrace.providers.serve import request as reading

    sleeps = _Sleeps()
    monkeypatch.setattr(reading, "asyncio", sleeps)
    body = (f"{size:x}\r\n".encode() + b"y" * size + b"\r\n") * chunks + b"0\r\n\r\n"
    stream = asyncio.StreamReader(limit=1 << 20)
    stream.feed_data(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n" + body)
    stream.feed_eof()
    got = await reading.read_request(stream, Limits(max_body=1 << 30))
    assert got is not None and len(got.body) == size * chunks
    assert len(sleeps.asked) == chunks // reading.YIELD_EVERY  # the loop is handed back every 64 chunks
    assert sleeps.asked.count(reading.PAUSE_S) == rests
