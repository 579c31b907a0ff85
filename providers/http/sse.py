"""Server-Sent Events parsed from raw bytes by the WHATWG rules, so each event keeps the time its bytes came.

Not httpx's line iterator: that splits on U+2028 and friends, which JSON allows inside strings. Lines end at
CRLF, LF or CR only; a CR at the end of one chunk and an LF at the start of the next are one line ending.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_EOL: Final[re.Pattern[bytes]] = re.compile(rb"\r\n|\r|\n")
_BOM: Final[bytes] = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: its type (``message`` unless an ``event:`` line named it), data and last id."""

    event: str
    data: str
    id: str = ""
    valid_utf8: bool = True
    """False when some of its bytes were not UTF-8 (they decode to U+FFFD, as the spec says)."""


class SSEParser:
    """Feed it chunks of bytes as they arrive; it returns the events each chunk completes.

    An event without its terminating blank line is never dispatched, even at the end of the stream
    (``pending`` tells whether one was cut off).
    """

    __slots__ = ("_bad", "_buf", "_data", "_event", "_skip_lf", "_started", "last_id", "retry_ms")

    def __init__(self) -> None:
        self._buf = b""
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

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by ``chunk``."""
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._buf + chunk if self._buf else chunk
        if not self._started:
            if len(buf) < len(_BOM) and _BOM.startswith(buf):
                self._buf = buf
                return []
            self._started = True
            if buf.startswith(_BOM):
                buf = buf[len(_BOM):]
        events: list[SSEEvent] = []
        pos = 0
        for m in _EOL.finditer(buf):
            event = self._line(buf[pos : m.start()])
            pos = m.end()
            if event is not None:
                events.append(event)
        # A CR ending the chunk ended its line now (no waiting on the next chunk); an LF starting the next
        # chunk is the rest of that CRLF, not a blank line.
        self._skip_lf = pos == len(buf) and buf.endswith(b"\r")
        self._buf = buf[pos:]
        return events

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
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self.last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = ""
            self._bad = False
            return None
        event = SSEEvent(self._event or "message", "\n".join(self._data), self.last_id, not self._bad)
        self._data = []
        self._event = ""
        self._bad = False
        return event
