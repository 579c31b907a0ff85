"""The stream decoder, the extension point of an HTTP protocol: SSE events in, tokrace events out, and the helpers
every decoder uses."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ...model.events import Delta, Error, Event, Extra
from .error_text import excerpt
from .sse import SSEEvent


class StreamProblem(Exception):
    """A stream said something the adapter cannot read; becomes an ``Error`` event of ``kind``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The JSON scanner under ``json.loads``, without its per-call set-up: half the cost on a small object."""


def load_json(sse: SSEEvent) -> Any:
    """The JSON of an event's data, or a :class:`StreamProblem` quoting the start of what came instead."""
    data = sse.data
    try:
        value, end = _SCAN(data, 0)
        if end == len(data):
            return value
    except (StopIteration, ValueError):  # not a value at its very start: json.loads says what it is
        pass
    try:  # surrounding white space, something after the value, malformed: exactly as json.loads reads it
        return json.loads(data)
    except json.JSONDecodeError:
        raise StreamProblem("protocol", f"the server sent malformed JSON ({excerpt(sse.data, 60)!r}); "
                                        "the stream is garbled, try again") from None


@dataclass(slots=True)
class PendingCall:
    """A tool call whose arguments are still streaming, in any protocol."""

    id: str
    name: str
    arguments: str = ""
    sent: bool = False
    """Whether its ``ToolCall`` event has gone out."""


class StreamDecoder(ABC):
    """Turns one response's SSE events into tokrace events, keeping whatever state the protocol needs.

    A protocol adapter (:class:`~.provider.HTTPProvider` subclass) makes a fresh decoder per response
    (``HTTPProvider.decoder``); the read loop (:mod:`.read_loop`) parses the bytes into SSE events and hands each
    to :meth:`feed` with the moment its bytes reached the socket, then calls :meth:`end` once the bytes run out.

    - :meth:`feed` returns the events one SSE event stands for, each stamped ``t`` (often none, or one
      :meth:`delta`); the protocol's terminal event ends the list with ``Done`` or ``Error`` and sets
      :attr:`finished`. Raise :class:`StreamProblem` for what cannot be read; any other Python error a malformed
      chunk causes is turned into one by :func:`decode`, quoting the chunk.
    - :meth:`end` says what the end of the bytes means: by default nothing once :attr:`finished`, else an
      ``incomplete`` error.
    - Count text through :meth:`delta` (:attr:`deltas` goes into error messages and the runaway limit).
    - :attr:`text_keys` names the JSON keys whose events carry nothing but text, so that the read loop may take
      their text without a full parse (:class:`~.text_events.TextEvents`); leave it empty to parse every event.
    """

    text_keys: tuple[tuple[str, str], ...] = ()
    """``("\"key\":\"", channel)`` for each JSON key whose string, alone in an event, is all the event says: a
    piece of text of that channel, and nothing else changes (see :class:`TextEvents`)."""

    def __init__(self, asked_tier: str | None) -> None:
        self.asked_tier = asked_tier
        self.finished = False
        """True once the protocol's terminal event (or an error) was seen."""
        self.deltas = 0
        """How many pieces of generated text arrived (for error messages)."""
        self._reported_tier: str | None = None

    @abstractmethod
    def feed(self, sse: SSEEvent, t: float) -> list[Event]:
        """The events an SSE event stands for, stamped ``t``; a terminal one ends in ``Done`` or ``Error``."""

    def end(self, t: float) -> list[Event]:
        """What the end of the byte stream means (by default: it came too early)."""
        return [] if self.finished else [self.incomplete(t)]

    def incomplete(self, t: float) -> Error:
        return Error(t=t, error="incomplete",
                     message=f"the stream ended without its final event after {self.deltas} text chunks; "
                             "the answer may be cut short, try again")

    def reported_error(self, t: float, said: str, error: str = "stream") -> Error:
        """The error event a server sent mid-stream, with what it said."""
        return Error(t=t, error=error, message=f"the server reported an error mid-stream after {self.deltas} text "
                                               f"chunks: {said}; try again")

    def delta(self, t: float, text: str, channel: str = "content") -> Delta:
        self.deltas += 1
        return Delta(t=t, text=text, channel=channel)  # type: ignore[arg-type]

    def reported_tier(self, got: Any, t: float) -> list[Event]:
        """The service tier asked for and the one the server says it used once per change."""
        if not isinstance(got, str) or not got or got == self._reported_tier:
            return []
        self._reported_tier = got
        return [Extra(t=t, source="service_tier", data={"asked": self.asked_tier or "", "got": got})]


def decode(decoder: StreamDecoder, sse: SSEEvent, t: float) -> list[Event]:
    """``decoder.feed``, where a chunk of a shape the decoder does not expect (a number where a list belongs, a
    list where an object does) is a :class:`StreamProblem` quoting it, never a Python error."""
    try:
        return decoder.feed(sse, t)
    except StreamProblem:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, OverflowError, RecursionError):
        raise StreamProblem("protocol", f"the server sent a chunk tokrace cannot read: {excerpt(sse.data, 120)!r}; "
                                        "is base_url an endpoint of this tier's protocol? try again") from None
