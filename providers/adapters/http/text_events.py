"""Text events: the events of a stream that repeat the same JSON around a new piece of text, read without parsing.

An event in the shape of the last text event, a new JSON string in place of its text, parses to the same object
but for that string: the decoder would say the same with the new text, so its delta is made at once.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from typing import Final

from ...model.events import Delta, Event
from .sse import SSEEvent

_SCAN_STRING: Final[Callable[[str, int], tuple[str, int]]] = json.decoder.scanstring  # type: ignore[attr-defined]
"""The JSON string scanner (from just after the opening quote to just after the closing one), as json.loads'."""

_STRING_BODY: Final[str] = r'[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*'
"""What a JSON string holds between its quotes: no quote, backslash or control character but in an escape (each
escape is checked by the JSON scanner when one is there)."""

INERT: Final[tuple[str, ...]] = ('"obfuscation":"', '"sequence_number":')
"""Fields whose value changes from event to event and that no decoder reads: OpenAI's random padding (Chat and
Responses chunks carry ``obfuscation`` unless asked not to) and the number of each Responses event. A shape
holds their values as wildcards, so that such a stream's events still share one shape."""

_DIGITS: Final[re.Pattern[str]] = re.compile(r"\d+")


def _source(part: str) -> tuple[str, int, int]:
    """A part of a shape (what precedes or follows the text) as a regular expression matching it with any values
    of its :data:`INERT` fields, each value a group: (its source, its characters that are not such values, groups)."""
    spots: list[tuple[int, str]] = []
    for key in INERT:
        at = part.find(key)
        while at >= 0:
            spots.append((at + len(key), key))
            at = part.find(key, at + 1)
    out: list[str] = []
    pos = fixed = groups = 0
    for start, key in sorted(spots):
        if start < pos:
            continue
        if key.endswith('"'):
            try:
                end = _SCAN_STRING(part, start)[1] - 1  # the value's closing quote stays in the shape
            except ValueError:
                continue
            body = _STRING_BODY
        else:
            digits = _DIGITS.match(part, start)
            if digits is None:
                continue
            end, body = digits.end(), r"\d+"
        out += (re.escape(part[pos:start]), f"({body})")
        fixed += start - pos
        groups += 1
        pos = end
    out.append(re.escape(part[pos:]))
    return "".join(out), fixed + len(part) - pos, groups


class TextEvents:
    """Most events of a stream are the same shape around a new piece of text (``{"choices":[{"index":0,"delta":
    {"content":"…"},"finish_reason":null}]…}``). When an event decoded to a single text delta read from one of the
    decoder's :attr:`~StreamDecoder.text_keys`, its data is kept as the text's string literal and what surrounds
    it. A next event made of exactly that surrounding around one JSON string (the values of :data:`INERT` fields
    aside) parses to the same object but for that string, so the decoder would say the same, with the new text: its
    delta is made without parsing or decoding. Any event decoded in full forgets the shape (the decoder's state may
    have changed), and a stream whose shapes never repeat (a field that changes every event) stops keeping them."""

    __slots__ = ("_at", "_fixed", "_one", "_pattern", "_post", "_pre", "channel", "event", "hits", "keys", "learned",
                 "prefix", "suffix")

    GIVE_UP: Final[int] = 32
    """Shapes kept without one of them serving, after which a stream's shapes are not kept any more."""

    def __init__(self, keys: tuple[tuple[str, str], ...]) -> None:
        self.keys = keys
        self.prefix: str | None = None
        self.suffix = ""
        self.channel = ""
        self.event = ""
        self.learned = 0
        self.hits = 0
        self._pre: tuple[str, int, int] = ("", 0, 0)
        self._post: tuple[str, int, int] = ("", 0, 0)
        """The shape's parts before and after the text as patterns (see :func:`_source`)."""
        self._one: re.Pattern[str] | None = None
        """The kept shape's data as a pattern, when it holds :data:`INERT` values (else the parts are compared)."""
        self._pattern: re.Pattern[str] | None = None
        """The kept shape as a whole event (its ``event:`` line, its ``data:`` line, the blank line), made when first
        used (see :meth:`whole`)."""
        self._fixed = 0
        """Characters of such an event that are neither its text nor inert values."""
        self._at = 0
        """Which group of :attr:`_pattern` is the text."""

    def text(self, sse: SSEEvent) -> str | None:
        """The new text of an event in the kept shape; ``None`` when it is not one (decode it in full)."""
        prefix = self.prefix
        if prefix is None or sse.event != self.event:
            return None
        data = sse.data
        if self._one is not None:
            match = self._one.fullmatch(data)
            raw = match.group("t") if match is not None else ""
            if not raw:
                return None
            if "\\" in raw:
                try:
                    raw = _SCAN_STRING(raw + '"', 0)[0]
                except ValueError:
                    return None
            self.hits += 1
            return raw
        suffix = self.suffix
        if not (data.startswith(prefix) and data.endswith(suffix)):
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
        """The texts of a read made only of whole events in the kept shape (each a ``data:`` line, after an
        ``event:`` line when the shape has one, and a blank line), in order, found in one pass over the read; the
        same texts :meth:`text` finds event by event. ``None`` for any other read (or one with an empty text): parse
        it event by event. The read must start a new event (``SSEParser.clean``)."""
        if self.prefix is None:
            return None
        pattern = self._pattern
        if pattern is None:
            opening = "data: " if self.event == "message" else f"event: {self.event}\ndata: "
            (pre, pre_fixed, pre_groups), (post, post_fixed, _) = self._pre, self._post
            pattern = self._pattern = re.compile(
                f"{re.escape(opening)}{pre}({_STRING_BODY})\"{post}\n\n")
            self._fixed = len(opening) + pre_fixed + 1 + post_fixed + 2
            self._at = pre_groups
        try:
            data = chunk.decode("utf-8")
        except UnicodeDecodeError:
            return None
        found = pattern.findall(data)
        if not found:
            return None
        # the events found, none overlapping, add up to the whole read: they are all of it, back to back
        if pattern.groups == 1:
            raws: list[str] = found
            size = sum(map(len, raws))
        else:
            at = self._at
            raws = [groups[at] for groups in found]
            size = sum(map(len, itertools.chain.from_iterable(found)))
        if self._fixed * len(raws) + size != len(data) or "" in raws:
            return None
        if "\\" in data:
            try:
                raws = [_SCAN_STRING(raw + '"', 0)[0] if "\\" in raw else raw for raw in raws]
            except ValueError:
                return None
        self.hits += len(raws)
        return raws

    def learn(self, sse: SSEEvent, events: list[Event]) -> None:
        """After a full decode: keep the event's shape when it said one piece of text from a text key."""
        self.prefix = None
        self._pattern = self._one = None
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
            if at < 0 or data.find(key, at + 1) >= 0:  # one such key in the event, or no shape
                continue
            start = at + len(key)
            try:
                text, end = _SCAN_STRING(data, start)
            except ValueError:
                return
            if text == delta.text:
                self.prefix, self.suffix, self.channel, self.event = data[:start], data[end:], channel, sse.event
                self._pre, self._post = _source(self.prefix), _source(self.suffix)
                if self._pre[2] or self._post[2]:
                    self._one = re.compile(f"{self._pre[0]}(?P<t>{_STRING_BODY})\"{self._post[0]}")
                self.learned += 1
            return
