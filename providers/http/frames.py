"""Text frames: the events of a stream that repeat the same JSON around a new piece of text, read without parsing.

An event in the frame of the last text event, a new JSON string in place of its text, parses to the same object
but for that string: the decoder would say the same with the new text, so its delta is made at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Final

from ..events import Delta, Event
from .sse import SSEEvent

_SCAN_STRING: Final[Callable[[str, int], tuple[str, int]]] = json.decoder.scanstring  # type: ignore[attr-defined]
"""The JSON string scanner (from just after the opening quote to just after the closing one), as json.loads'."""

_STRING_BODY: Final[str] = r'[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*'
"""What a JSON string holds between its quotes: no quote, backslash or control character but in an escape (each
escape is checked by the JSON scanner when one is there)."""


class TextFrames:
    """Most events of a stream are the same frame around a new piece of text (``{"choices":[{"index":0,"delta":
    {"content":"…"},"finish_reason":null}]…}``). When an event decoded to a single text delta read from one of the
    decoder's :attr:`~StreamDecoder.text_keys`, its data is kept as the text's string literal and what surrounds
    it. A next event made of exactly that surrounding around one JSON string parses to the same object but for
    that string, so the decoder would say the same, with the new text: its delta is made without parsing or
    decoding. Any event decoded in full forgets the frame (the decoder's state may have changed), and a stream
    whose frames never repeat (a field that changes every event) stops keeping them."""

    __slots__ = ("_fixed", "_pattern", "channel", "event", "hits", "keys", "learned", "prefix", "suffix")

    GIVE_UP: Final[int] = 32
    """Frames kept without one of them serving, after which a stream's frames are not kept any more."""

    def __init__(self, keys: tuple[tuple[str, str], ...]) -> None:
        self.keys = keys
        self.prefix: str | None = None
        self.suffix = ""
        self.channel = ""
        self.event = ""
        self.learned = 0
        self.hits = 0
        self._pattern: re.Pattern[str] | None = None
        """The kept frame as a whole event (its ``event:`` line, its ``data:`` line, the blank line), made when first
        used (see :meth:`whole`)."""
        self._fixed = 0
        """Characters of such an event that are not its text."""

    def text(self, sse: SSEEvent) -> str | None:
        """The new text of an event in the kept frame; ``None`` when it is not one (decode it in full)."""
        prefix = self.prefix
        if prefix is None:
            return None
        data, suffix = sse.data, self.suffix
        if not (data.startswith(prefix) and data.endswith(suffix)) or sse.event != self.event:
            return None
        start, cut = len(prefix), len(data) - len(suffix)
        if cut <= start:
            return None
        try:
            text, end = _SCAN_STRING(data, start)
        except ValueError:
            return None
        if end != cut or not text:
            return None
        self.hits += 1
        return text

    def whole(self, chunk: bytes) -> list[str] | None:
        """The texts of a read made only of whole events in the kept frame (each a ``data:`` line, after an
        ``event:`` line when the frame has one, and a blank line), in order, found in one pass over the read; the
        same texts :meth:`text` finds event by event. ``None`` for any other read (or one with an empty text): parse
        it event by event. The read must start a new event (``SSEParser.clean``)."""
        prefix = self.prefix
        if prefix is None:
            return None
        pattern = self._pattern
        if pattern is None:
            opening = ("data: " if self.event == "message" else f"event: {self.event}\ndata: ") + prefix
            closing = self.suffix + "\n\n"
            pattern = self._pattern = re.compile(f"{re.escape(opening)}({_STRING_BODY})\"{re.escape(closing)}")
            self._fixed = len(opening) + 1 + len(closing)
        try:
            data = chunk.decode("utf-8")
        except UnicodeDecodeError:
            return None
        raws: list[str] = pattern.findall(data)
        # the events found, none overlapping, add up to the whole read: they are all of it, back to back
        if not raws or self._fixed * len(raws) + sum(map(len, raws)) != len(data) or "" in raws:
            return None
        if "\\" in data:
            try:
                raws = [_SCAN_STRING(raw + '"', 0)[0] if "\\" in raw else raw for raw in raws]
            except ValueError:
                return None
        self.hits += len(raws)
        return raws

    def learn(self, sse: SSEEvent, events: list[Event]) -> None:
        """After a full decode: keep the event's frame when it said one piece of text from a text key."""
        self.prefix = None
        self._pattern = None
        if not self.keys or len(events) != 1 or not isinstance(delta := events[0], Delta):
            return
        if self.hits == 0 and self.learned >= self.GIVE_UP:
            self.keys = ()
            return
        data = sse.data
        for key, channel in self.keys:
            if channel != delta.channel:
                continue
            at = data.find(key)
            if at < 0 or data.find(key, at + 1) >= 0:  # one such key in the event, or no frame
                continue
            start = at + len(key)
            try:
                text, end = _SCAN_STRING(data, start)
            except ValueError:
                return
            if text == delta.text:
                self.prefix, self.suffix, self.channel, self.event = data[:start], data[end:], channel, sse.event
                self.learned += 1
            return
