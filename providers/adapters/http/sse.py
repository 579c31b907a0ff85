"""Server-Sent Events parsed from raw bytes by the WHATWG rules, so each event keeps the time its bytes came.

Not httpx's line iterator: that splits on U+2028 and friends, which JSON allows inside strings. Lines end at
CRLF, LF or CR only; a CR at the end of one chunk and an LF at the start of the next are one line ending.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

_EOL: Final[re.Pattern[bytes]] = re.compile(rb"\r\n|\r|\n")
_BOM: Final[bytes] = b"\xef\xbb\xbf"


class SSEEvent(NamedTuple):
    """One dispatched event: its type (``message`` unless an ``event:`` line named it), data and last id.

    A named tuple: immutable, and made in a third of a frozen dataclass's time (one per token)."""

    event: str
    data: str
    id: str = ""
    valid_utf8: bool = True
    """False when some of its bytes were not UTF-8 (they decode to U+FFFD, as the spec says)."""


MAX_EVENT_BYTES: Final[int] = 16 * 1024 * 1024
"""The largest one event may grow (its lines and data together): a server sending a line that never ends, or data
lines without the blank line that dispatches them, is stopped there instead of filling memory."""


class EventTooLarge(Exception):
    """One event grew past :data:`MAX_EVENT_BYTES` without being dispatched."""


class SSEParser:
    """Feed it chunks of bytes as they arrive; it returns the events each chunk completes.

    Linear in the bytes fed, however they are split: only the new chunk is searched for line endings, and the
    start of an unfinished line waits in one growing buffer, its data decoded from there (a line of N bytes costs
    N for the buffer and N for its text, never a joined or sliced copy besides). An event without its terminating
    blank line is never dispatched, even at the end of the stream (``pending`` tells whether one was cut off).
    """

    __slots__ = ("_bad", "_buf", "_data", "_event", "_limit", "_pending", "_size", "_skip_lf", "_started",
                 "last_id", "retry_ms")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buf = bytearray()
        """The unfinished line's bytes so far."""
        self._size = 0
        """Bytes of data held for the current event."""
        self._pending = 0
        """Bytes of the unfinished line."""
        self._limit = max_event_bytes
        self._started = False
        self._skip_lf = False
        self._data: list[str] = []
        self._event = ""
        self._bad = False
        self.last_id = ""
        """The last-event-ID buffer: it persists across events until the server changes it."""
        self.retry_ms: int | None = None
        """The reconnection time the server asked for, if any."""

    @property
    def pending(self) -> bool:
        """Whether bytes or fields of an undispatched event are waiting (at the end of a stream: lost)."""
        return bool(self._buf or self._data or self._event)

    @property
    def clean(self) -> bool:
        """Whether the next chunk starts a new event: nothing of one waits, and no line ending is cut in two."""
        return self._started and not (self._skip_lf or self._buf or self._data or self._event)

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by ``chunk``; :class:`EventTooLarge` when one grows past the limit."""
        if not chunk:
            return []
        if self._started and not self._skip_lf and b"\r" not in chunk:
            if chunk.endswith(b"\n\n") and not (self._buf or self._data or self._event):
                whole = self._whole_events(chunk)
                if whole is not None:
                    return whole
            return self._feed_lf(chunk)
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if not self._started:
            buf = bytes(self._buf) + chunk
            if len(buf) < len(_BOM) and _BOM.startswith(buf):
                self._buf = bytearray(buf)
                self._pending = len(buf)
                return []
            self._started = True
            self._buf = bytearray()
            self._pending = 0
            chunk = buf[len(_BOM):] if buf.startswith(_BOM) else buf
        events: list[SSEEvent] = []
        pos = 0
        for m in _EOL.finditer(chunk):
            piece = chunk[pos : m.start()]
            event = self._long_line(piece) if self._buf else self._line(piece)
            pos = m.end()
            if event is not None:
                events.append(event)
        # A CR ending the chunk ended its line now (no waiting on the next chunk); an LF starting the next
        # chunk is the rest of that CRLF, not a blank line.
        self._skip_lf = pos == len(chunk) and chunk.endswith(b"\r")
        if pos < len(chunk):
            self._buf += memoryview(chunk)[pos:]
            self._pending += len(chunk) - pos
        if self._size + self._pending > self._limit:
            raise EventTooLarge(self._limit)
        return events

    def _whole_events(self, chunk: bytes) -> list[SSEEvent] | None:
        """The events of a chunk of whole events each made of one ``data: `` line, optionally after one ``event: ``
        line (how every provider streams); ``None``, with nothing changed, for any other chunk."""
        events: list[SSEEvent] = []
        last_id = self.last_id
        for block in chunk[:-2].split(b"\n\n"):
            if block.startswith(b"data: "):
                if b"\n" in block:
                    return None
                kind, value = "message", block[6:]
            elif block.startswith(b"event: "):
                cut = block.find(b"\n")
                if block[cut:cut + 7] != b"\ndata: " or b"\n" in block[cut + 1:]:
                    return None
                try:
                    kind = block[7:cut].decode("utf-8") or "message"
                except UnicodeDecodeError:
                    return None
                value = block[cut + 7:]
            else:
                return None
            try:
                events.append(SSEEvent(kind, value.decode("utf-8"), last_id, True))
            except UnicodeDecodeError:
                return None
        return events

    def _feed_lf(self, chunk: bytes) -> list[SSEEvent]:
        """:meth:`feed` for a chunk whose lines all end in LF (what every server sends): split once, and the
        ``data:`` and blank lines, nearly all of them, handled inline. The same events as the general path."""
        lines = chunk.split(b"\n")
        rest = lines.pop()  # after the last LF: the start of a line still coming (often empty)
        if self._buf and lines:
            self._long_line(lines[0])  # never blank: it never dispatches
            del lines[0]
        events: list[SSEEvent] = []
        data = self._data
        for raw in lines:
            if not raw:  # a blank line dispatches
                self._size = 0
                if data:
                    events.append(SSEEvent(self._event or "message", data[0] if len(data) == 1 else "\n".join(data),
                                           self.last_id, not self._bad))
                    self._data = data = []
                self._event = ""
                self._bad = False
            elif raw.startswith(b"data:"):
                value = raw[6:] if raw[5:6] == b" " else raw[5:]
                try:
                    data.append(value.decode("utf-8"))
                except UnicodeDecodeError:
                    data.append(value.decode("utf-8", "replace"))
                    self._bad = True
                self._size += len(raw)
            else:
                self._line(raw)  # never dispatches: only a blank line does
        if rest:
            self._buf += rest
            self._pending += len(rest)
        if self._size + self._pending > self._limit:
            raise EventTooLarge(self._limit)
        return events

    def _long_line(self, end: bytes) -> SSEEvent | None:
        """The unfinished line, ended by ``end``: its data decoded straight from the buffer (see the class)."""
        buf, self._buf, self._pending = self._buf, bytearray(), 0
        buf += end
        if not buf.startswith(b"data:"):
            return self._line(bytes(buf))
        with memoryview(buf) as view:
            value = view[6 if buf[5:6] == b" " else 5:]
            try:
                self._data.append(str(value, "utf-8"))
            except UnicodeDecodeError:
                self._data.append(str(value, "utf-8", "replace"))
                self._bad = True
            value.release()
        self._size += len(buf)
        return None

    def _line(self, raw: bytes) -> SSEEvent | None:
        if not raw:
            return self._dispatch()
        if raw[:1] == b":":
            return None  # a comment: keep-alives and OpenRouter's processing notes
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line = raw.decode("utf-8", "replace")
            self._bad = True
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._size += len(raw)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self.last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SSEEvent | None:
        self._size = 0
        if not self._data:
            self._event = ""
            self._bad = False
            return None
        event = SSEEvent(self._event or "message", "\n".join(self._data), self.last_id, not self._bad)
        self._data = []
        self._event = ""
        self._bad = False
        return event
