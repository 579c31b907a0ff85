"""HTTP/1.1 as the proxy relays it: message heads read and written, hop-by-hop headers dropped (RFC 9110 §7.6.1),
and the end of a body found in the bytes as they pass (Content-Length, chunked, or the connection's close), without
changing one byte of it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Final

MAX_HEAD_BYTES: Final[int] = 64 * 1024
"""The largest message head (request or status line and headers) the proxy reads (asyncio's stream limit); a
longer one is refused."""

HOP_BY_HOP: Final[frozenset[str]] = frozenset({
    "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "upgrade",
})
"""Headers that describe one connection, not the message, so never forwarded (plus any ``Connection`` names).
``Transfer-Encoding`` is forwarded: the body's bytes pass unchanged, chunk framing included."""


class HeadError(Exception):
    """A message head the proxy cannot read (too long, malformed, cut off)."""


@dataclass(slots=True)
class Head:
    """A request or response head: its first line's three parts and its headers in order, names as sent."""

    first: tuple[str, str, str]
    headers: list[tuple[str, str]] = field(default_factory=list)

    def get(self, name: str, default: str = "") -> str:
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return default

    def tokens(self, name: str) -> set[str]:
        """A comma-separated header's values, lower-cased (``Connection: keep-alive, Upgrade``)."""
        name = name.lower()
        return {part.strip().lower() for key, value in self.headers if key.lower() == name
                for part in value.split(",") if part.strip()}

    def forwarded(self, drop: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
        """The end-to-end headers: hop-by-hop ones, those the ``Connection`` header names, and ``drop`` left out."""
        gone = HOP_BY_HOP | self.tokens("connection") | drop
        return [(k, v) for k, v in self.headers if k.lower() not in gone]

    @property
    def keep_alive(self) -> bool:
        return "close" not in self.tokens("connection") and self.first[0].upper() != "HTTP/1.0" \
            and self.first[2].upper() != "HTTP/1.0"


def encode_head(first: tuple[str, str, str], headers: list[tuple[str, str]]) -> bytes:
    lines = [" ".join(first), *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def read_head(reader: asyncio.StreamReader) -> Head | None:
    """The next head on the connection, or ``None`` when it closed cleanly before one began."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise HeadError("the connection closed in the middle of a message head") from None
    except asyncio.LimitOverrunError:
        raise HeadError(f"a message head over {MAX_HEAD_BYTES // 1024} KB") from None
    return parse_head(raw)


def parse_head(raw: bytes) -> Head:
    lines = raw.decode("latin-1").split("\r\n")
    while lines and not lines[0]:  # (a stray CRLF before a request is allowed: RFC 9112 §2.2)
        lines.pop(0)
    parts = lines[0].split(" ", 2) if lines else []
    if len(parts) < 2:
        raise HeadError(f"a malformed first line {lines[0][:80]!r}" if lines else "an empty head")
    first = (parts[0], parts[1], parts[2] if len(parts) > 2 else "")
    head = Head(first)
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise HeadError(f"a malformed header line {line[:80]!r}")
        head.headers.append((name, value.strip()))
    return head


class BodyEnd:
    """Finds where a body ends in its bytes as they pass, and hands on its payload (the chunk framing taken off)
    for the copy that is measured; the bytes themselves are relayed as they came.

    ``length`` is the Content-Length; ``chunked`` says Transfer-Encoding ends in chunked; neither: the body runs
    until the connection closes (``until_close``)."""

    __slots__ = ("_line", "_state", "_want", "chunked", "done", "until_close")

    def __init__(self, length: int | None, chunked: bool) -> None:
        self.chunked = chunked
        self.until_close = not chunked and length is None
        self.done = not chunked and length == 0
        self._state = "size" if chunked else "data"
        """``size`` (a chunk-size line), ``data`` (payload), ``crlf`` (after a chunk), ``trailer``."""
        self._want = 0 if chunked else (length or 0)
        self._line = b""

    @property
    def wants(self) -> int:
        """How many bytes a reader may take next without reading past the body: a count of payload bytes, or 0
        when a chunk-size, chunk-end or trailer line comes next (read up to its newline)."""
        return self._want if self._state == "data" else 0

    def feed(self, data: bytes) -> tuple[int, list[bytes]]:
        """How many of ``data``'s bytes belong to the body (the rest is the next message's), and the payload
        pieces among them."""
        if self.until_close:
            return len(data), [data] if data else []
        pos, out, size = 0, [], len(data)
        while pos < size and not self.done:
            if self._state == "data":
                take = min(self._want, size - pos)
                if take:
                    out.append(data if take == size else data[pos:pos + take])
                pos += take
                self._want -= take
                if self._want == 0:
                    self._state = "crlf" if self.chunked else self._state
                    self.done = not self.chunked
                continue
            end = data.find(b"\n", pos)
            if end < 0:
                self._line += data[pos:]
                if len(self._line) > 4096:
                    raise HeadError("a chunk-size or trailer line over 4 KB")
                return size, out
            line, self._line = self._line + data[pos:end], b""
            pos = end + 1
            if self._state == "size":
                try:
                    want = int(line.split(b";", 1)[0].strip() or b"x", 16)
                except ValueError:
                    raise HeadError(f"a malformed chunk size {line[:40]!r}") from None
                if want < 0:
                    raise HeadError(f"a malformed chunk size {line[:40]!r}")
                self._state, self._want = ("trailer", 0) if want == 0 else ("data", want)
            elif self._state == "crlf":
                self._state = "size"
            elif not line.strip():  # the blank line that ends the trailer
                self.done = True
        return pos, out


def body_end(head: Head, *, response_to: str | None = None) -> BodyEnd:
    """Where the message's body ends (RFC 9112 §6.3); ``response_to`` is the request's method for a response."""
    if response_to is not None:
        status = int(head.first[1]) if head.first[1].isdigit() else 0
        if response_to.upper() == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return BodyEnd(0, False)
    if "chunked" in head.tokens("transfer-encoding"):
        return BodyEnd(None, True)
    length = head.get("content-length")
    if length:
        if not length.isdigit():
            raise HeadError(f"a malformed Content-Length {length[:40]!r}")
        return BodyEnd(int(length), False)
    return BodyEnd(0, False) if response_to is None else BodyEnd(None, False)
