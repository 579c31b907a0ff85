"""Reading one HTTP/1.1 request for ``tokrace serve``, bounded: the head's size and header count, the body's size
(``--max-body``), and the time a client may take to send it. A client that breaks a bound is answered with its
status (413, 431, 400, 408) and its connection closed; it costs only its own connection (docs/faults.md#serve)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, Final

MAX_BODY: Final[int] = 32 * 1024 * 1024
"""The largest request body served by default (``--max-body``): a long conversation is a few MB."""
MAX_HEADERS: Final[int] = 100
"""The most header lines one request may have."""
MAX_HEAD_BYTES: Final[int] = 64 * 1024
"""The most bytes a request's line and headers may take together."""
READ_DEADLINE_S: Final[float] = 30.0
"""How long a client may take to send one whole request once it has begun it."""
YIELD_EVERY: Final[int] = 64
"""Chunks of a chunked body parsed before the loop is handed back (a client sending a byte per chunk fills a read
with tens of thousands: 64 take a few tens of µs, far below the 1 ms other answers are held to)."""
PAUSE_S: Final[float] = 0.001
"""How long a chunked body's reading rests after :data:`YIELD_EVERY` chunks that carried fewer than
:data:`SMALL_BATCH` bytes together (a client sending tiny chunks as fast as it can): their parsing then takes a small
share of a core, not all of it. A server kept busy on its core is scheduled by the kernel as a busy process, behind
whatever else runs, and every other answer's moments went out tens of ms late on a loaded machine. Chunks of a
useful size never rest, and a client sending tiny chunks slowly loses a millisecond per 64 of them."""
SMALL_BATCH: Final[int] = YIELD_EVERY * 256
"""Bytes under which :data:`YIELD_EVERY` chunks are tiny ones (see :data:`PAUSE_S`)."""
READ_SIZE: Final[int] = 1 << 20
"""A read of a chunked body: more than a stream ever buffers, so each read takes all it holds."""
MAX_CHUNK_LINE: Final[int] = 1024
"""The longest a chunk's size line (with its extensions) may be."""
IDLE_S: Final[float] = 120.0
"""How long a kept-alive connection may wait for its next request."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds a request is read within."""

    max_body: int = MAX_BODY
    max_headers: int = MAX_HEADERS
    max_head_bytes: int = MAX_HEAD_BYTES
    read_deadline_s: float = READ_DEADLINE_S
    idle_s: float = IDLE_S


@dataclass(slots=True)
class Request:
    """A request read whole: its line, its headers (names lower-cased) and its body."""

    method: str
    target: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class Refused(Exception):
    """A request broke a bound: answered with ``status`` and ``message``, then its connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def read_request(reader: asyncio.StreamReader, limits: Limits) -> Request | None:
    """The next request on a connection, or ``None`` when the client closed it (or stayed idle past
    ``idle_s``); :class:`Refused` when it breaks a bound."""
    try:
        async with asyncio.timeout(limits.idle_s):
            line = await _line(reader, limits.max_head_bytes)
    except TimeoutError:
        return None
    if not line.strip():
        return None
    try:
        async with asyncio.timeout(limits.read_deadline_s):
            return await _rest(reader, line, limits)
    except TimeoutError:
        raise Refused(408, f"the request took longer than {limits.read_deadline_s:g} s to arrive") from None


async def _line(reader: asyncio.StreamReader, most: int) -> bytes:
    try:
        return await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise Refused(431, f"a request line or header is longer than {most // 1024} KB") from None
    except asyncio.IncompleteReadError as exc:
        return exc.partial


async def _rest(reader: asyncio.StreamReader, line: bytes, limits: Limits) -> Request:
    parts = line.decode("latin-1").split(" ", 2)
    if len(parts) != 3:
        raise Refused(400, "the request line is not METHOD TARGET HTTP/1.1")
    request = Request(parts[0], parts[1])
    size = len(line)
    count = 0
    while True:
        raw = await _line(reader, limits.max_head_bytes)
        if raw in (b"\r\n", b"\n", b""):
            break
        size += len(raw)
        count += 1
        if count > limits.max_headers or size > limits.max_head_bytes:
            raise Refused(431, f"the request's headers are more than {limits.max_headers} lines or "
                               f"{limits.max_head_bytes // 1024} KB")
        name, _, value = raw.decode("latin-1").partition(":")
        request.headers[name.strip().lower()] = value.strip()
    if request.headers.get("transfer-encoding", "").lower() == "chunked":
        request.body = await _chunked(reader, limits.max_body)
        return request
    length_text = request.headers.get("content-length") or "0"
    try:
        length = int(length_text)
    except ValueError:
        raise Refused(400, f"content-length {length_text[:20]!r} is not a number") from None
    if length < 0:
        raise Refused(400, "content-length is negative")
    if length > limits.max_body:
        raise Refused(413, _too_big(length, limits.max_body))
    request.body = await reader.readexactly(length)
    return request


class _Chunks:
    """A chunked body parsed from big reads of the stream: ``StreamReader``'s own small reads each move its whole
    buffer (a byte per chunk made every read cost ~10 µs, and the loop's other answers late by tens of ms)."""

    __slots__ = ("at", "pending", "reader")

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.pending = b""
        self.at = 0

    async def fill(self) -> None:
        more = await self.reader.read(READ_SIZE)
        if not more:
            raise asyncio.IncompleteReadError(self.pending[self.at:], None)
        self.pending = self.pending[self.at:] + more  # what is left unparsed is under one size line
        self.at = 0

    async def line(self) -> bytes:
        while (end := self.pending.find(b"\n", self.at)) < 0:
            if len(self.pending) - self.at > MAX_CHUNK_LINE:
                raise Refused(400, "a chunk's size line is too long")
            await self.fill()
        line, self.at = self.pending[self.at:end], end + 1
        return line

    async def take(self, size: int, into: bytearray | None) -> None:
        while size:
            if self.at >= len(self.pending):
                await self.fill()
            piece = self.pending[self.at:self.at + size]
            self.at += len(piece)
            size -= len(piece)
            if into is not None:
                into += piece

    def give_back(self) -> None:
        """Hand what was read past the body back to the stream (a pipelined next request): the stream's buffer is
        empty here, as every read took all of it."""
        if self.at < len(self.pending):
            self.reader.feed_data(self.pending[self.at:])


async def _chunked(reader: asyncio.StreamReader, most: int) -> bytes:
    """A chunked body joined in one buffer (linear in its size, however small its chunks), refused past ``most``."""
    body = bytearray()
    chunks = _Chunks(reader)
    count = 0
    batch_from = 0
    while True:
        count += 1
        if count % YIELD_EVERY == 0:  # chunks already read are parsed without a wait: let other answers be written,
            small = len(body) - batch_from < SMALL_BATCH  # and rest after tiny ones
            await asyncio.sleep(PAUSE_S if small else 0)
            batch_from = len(body)
        size_text = (await chunks.line()).split(b";")[0].strip()
        try:
            size = int(size_text or b"0", 16)
        except ValueError:
            raise Refused(400, "a chunk's size is not a hexadecimal number") from None
        if size == 0:
            break
        if len(body) + size > most:
            raise Refused(413, _too_big(len(body) + size, most))
        await chunks.take(size, body)
        await chunks.take(2, None)
    while (await chunks.line()).strip():  # trailers, if any
        pass
    chunks.give_back()
    return bytes(body)


def _too_big(size: int, most: int) -> str:
    return (f"the request body ({size:,} bytes) is larger than this server takes ({most:,} bytes; "
            "tokrace serve --max-body raises it)")


def parse_json(body: bytes) -> Any:
    """A request body's JSON (``None`` when it is not JSON); :class:`Refused` (400) when it nests deeper than Python's
    parser goes."""
    try:
        return json.loads(body or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    except RecursionError:
        raise Refused(400, "the body's JSON nests too deeply to read") from None
