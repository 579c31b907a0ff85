"""A lane's events in compact columns: what a race keeps of every event, at 12 bytes plus its text per delta (a
time, a channel, a count, where its text starts) instead of a Python object each (~150 bytes), so that a lane of a
million tokens stays small.

It reads as a sequence of events (length, index, slice, iteration): a ``Delta`` is made again on the way out, equal
to the one that went in; every other kind of event (a few per turn) is kept as it came.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, overload

from .events import Channel, Delta, Event

BLOCK: Final[int] = 4096
"""Events per block of text: a full block's texts are joined into one string (its pieces' bounds kept apart)."""

_CHANNELS: Final[tuple[Channel, ...]] = ("content", "reasoning", "tool_args")
_CODE: Final[dict[str, int]] = {name: i for i, name in enumerate(_CHANNELS)}
_OTHER: Final[int] = 255
"""The code of an event that is not a delta (kept as an object)."""
_NO_COUNT: Final[int] = -1
"""A delta without the provider's own count (``tokens=None``)."""
_MAX_COUNT: Final[int] = 127
"""The largest count kept in a column (a byte); a delta with a bigger one is kept as it came."""


class EventLog(Sequence[Event]):
    """Events appended in order, kept in columns; reads back as the same events."""

    __slots__ = ("_bounds", "_codes", "_open", "_open_bounds", "_others", "_texts", "_times", "_tokens")

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._times = array("d")
        self._codes = array("B")
        self._tokens = array("b")
        self._texts: list[str] = []
        """The joined text of every full block."""
        self._bounds: list[array[int]] = []
        """Per full block: where each event's text starts in the block's string (and where the last one ends)."""
        self._open: list[str] = []
        """The texts of the block being filled."""
        self._open_bounds = array("I", [0])
        self._others: dict[int, Event] = {}
        for event in events:
            self.append(event)

    def append(self, event: Event) -> None:
        """Keep one more event."""
        index = len(self._times)
        self._times.append(event.t)
        if isinstance(event, Delta) and (event.tokens is None or 0 <= event.tokens <= _MAX_COUNT):
            self._codes.append(_CODE[event.channel])
            self._tokens.append(_NO_COUNT if event.tokens is None else event.tokens)
            self._open.append(event.text)
            self._open_bounds.append(self._open_bounds[-1] + len(event.text))
        else:
            self._codes.append(_OTHER)
            self._tokens.append(0)
            self._others[index] = event
            self._open.append("")
            self._open_bounds.append(self._open_bounds[-1])
        if len(self._open) == BLOCK:
            self._texts.append("".join(self._open))
            bounds = self._open_bounds
            self._bounds.append(array("H", bounds) if bounds[-1] < 2**16 else bounds)  # two bytes an event, mostly
            self._open = []
            self._open_bounds = array("I", [0])

    def __len__(self) -> int:
        return len(self._times)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            return [self._event(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("event index out of range")
        return self._event(index)

    def __iter__(self) -> Iterator[Event]:
        for i in range(len(self._times)):
            yield self._event(i)

    def __eq__(self, other: object) -> bool:
        """Equal to any list, tuple or log of the same events."""
        if not isinstance(other, EventLog | list | tuple):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"EventLog({len(self)} events)"

    def _event(self, i: int) -> Event:
        code = self._codes[i]
        if code == _OTHER:
            return self._others[i]
        block, j = divmod(i, BLOCK)
        if block < len(self._texts):
            bounds = self._bounds[block]
            text = self._texts[block][bounds[j]:bounds[j + 1]]
        else:
            text = self._open[j]
        tokens = self._tokens[i]
        return Delta(t=self._times[i], text=text, channel=_CHANNELS[code],
                     tokens=None if tokens == _NO_COUNT else tokens)


def as_sequence(events: Iterable[Event]) -> Sequence[Event]:
    """``events`` as something that can be read more than once (a list only when it was a one-shot iterator)."""
    return events if isinstance(events, Sequence) else list(events)
