"""The one event vocabulary that flows from adapters through the race into metrics, recordings and the screen.

Every event carries ``t``: seconds since its lane started, stamped when its bytes were read. Events are small
frozen dataclasses and serialise to one flat JSON object each (``kind`` names the class).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Final, Literal, TypeAlias, overload

from .kinds import SEGMENT_KINDS as SEGMENT_KINDS  # the kinds of span drawn on the timeline, re-exported
from .kinds import SegmentKind as SegmentKind
from .printable import one_line

Channel: TypeAlias = Literal["content", "reasoning", "tool_args"]
"""Which stream a delta belongs to: the visible answer, reasoning/thinking text, or tool-call arguments."""


@dataclass(frozen=True, slots=True)
class Request:
    """A request was handed to the HTTP client (``t`` is the turn's start)."""

    t: float
    turn: int = 0
    model: str = ""
    endpoint: str = ""
    kind: Literal["request"] = "request"


@dataclass(frozen=True, slots=True)
class Headers:
    """The response head arrived."""

    t: float
    status: int = 200
    request_id: str = ""
    service_tier: str = ""
    kind: Literal["headers"] = "headers"


@dataclass(frozen=True, slots=True)
class Delta:
    """Generated text arrived; ``tokens`` is the provider's own count for this piece when it gave one.

    ``chunks`` is how many of the server's chunks the piece joins: text chunks of one channel read together (one
    read of the socket, so one stamp) are one event. Every consumer treats a delta of ``chunks=k`` exactly as ``k``
    deltas at the same ``t`` (``k - 1`` gaps of zero, ``k`` chunks counted), so joining changes no figure. A turn's
    first text delta is never joined (its own count is left out of the decode rate); a joined one carries no
    ``tokens`` of the provider's."""

    t: float
    text: str
    channel: Channel = "content"
    tokens: int | None = None
    chunks: int = 1
    kind: Literal["delta"] = "delta"


class DeltaRun(Sequence[Delta]):
    """Deltas of one channel handed over together (a synthetic lane's wake-up: hundreds at 12,000 tok/s), kept as
    columns: the sequence of ``Delta(times[i], texts[i], channel, tokens[i])``, each of one chunk.

    The same events as that list, to anyone who reads them one by one (each ``Delta`` is made when it is asked
    for); the race's own listeners (the event log, the live model, the recorder) read the columns instead, and the
    hot path never makes a ``Delta`` at all. Treat the columns as read-only: a run is handed to every listener."""

    __slots__ = ("channel", "texts", "times", "tokens")

    def __init__(self, times: list[float], texts: list[str], channel: Channel, tokens: list[int]) -> None:
        if not len(times) == len(texts) == len(tokens):
            raise ValueError("a run's columns must be of one length")
        self.times = times
        self.texts = texts
        self.channel: Channel = channel
        self.tokens = tokens

    def __len__(self) -> int:
        return len(self.times)

    @overload
    def __getitem__(self, index: int) -> Delta: ...

    @overload
    def __getitem__(self, index: slice) -> DeltaRun: ...

    def __getitem__(self, index: int | slice) -> Delta | DeltaRun:
        if isinstance(index, slice):
            return DeltaRun(self.times[index], self.texts[index], self.channel, self.tokens[index])
        return Delta(self.times[index], self.texts[index], self.channel, self.tokens[index])

    def __iter__(self) -> Iterator[Delta]:
        return map(Delta, self.times, self.texts, itertools.repeat(self.channel), self.tokens)

    def __repr__(self) -> str:
        return f"DeltaRun({len(self)} {self.channel} deltas)"


@dataclass(frozen=True, slots=True)
class Usage:
    """The provider's own token counts: cumulative, so a later usage replaces an earlier one."""

    t: float
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cached: int = 0
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class Segment:
    """A span on the timeline that the deltas alone cannot show (connect, tool, human, retry, stall)."""

    t: float
    seg: SegmentKind
    start: float
    end: float
    label: str = ""
    chain: str | None = None
    """The sub-agent this span belongs to (an imported trace's parallel work); ``None`` for the lane's own."""
    kind: Literal["segment"] = "segment"


@dataclass(frozen=True, slots=True)
class Done:
    """The turn ended normally."""

    t: float
    finish_reason: str = "stop"
    kind: Literal["done"] = "done"


@dataclass(frozen=True, slots=True)
class Error:
    """The turn failed; whatever arrived before stays."""

    t: float
    error: str
    message: str
    status: int | None = None
    retry_after: float | None = None
    kind: Literal["error"] = "error"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model finished asking for a tool call (its arguments streamed before as ``tool_args`` deltas)."""

    t: float
    id: str
    name: str
    arguments: str
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class Extra:
    """A provider's own timing or metadata (Groq ``x_groq.usage``, Cerebras ``time_info``, llama.cpp ``timings``)."""

    t: float
    source: str
    data: dict[str, Any]
    kind: Literal["extra"] = "extra"


Event: TypeAlias = Request | Headers | Delta | Usage | Segment | ToolCall | Done | Error | Extra
"""Any event of the vocabulary."""

EVENT_TYPES: Final[dict[str, type[Any]]] = {
    "request": Request,
    "headers": Headers,
    "delta": Delta,
    "usage": Usage,
    "segment": Segment,
    "tool_call": ToolCall,
    "done": Done,
    "error": Error,
    "extra": Extra,
}

_FIELDS: Final[dict[str, frozenset[str]]] = {
    name: frozenset(f.name for f in fields(cls)) for name, cls in EVENT_TYPES.items()
}


class EventFormatError(ValueError):
    """A JSON object is not an event of this vocabulary."""


def finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinite number replaced by ``None``: JSON has no such numbers, and a figure
    that cannot be measured is written as ``null`` (never ``NaN`` or ``Infinity``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def event_to_dict(event: Event) -> dict[str, Any]:
    """One flat JSON-ready object, ``kind`` first; ``None`` fields are left out to keep recordings small."""
    data = asdict(event)
    out: dict[str, Any] = {"kind": data.pop("kind")}
    out.update((k, v) for k, v in data.items() if v is not None)
    if out.get("chunks") == 1 and out["kind"] == "delta":  # the usual case is left out: old lines stay the same
        del out["chunks"]
    return out


MAX_SECONDS: Final[float] = 1e7
"""The largest time (in seconds, about 115 days) an event read from a file may carry."""
TIME_TOLERANCE_S: Final[float] = 0.001
"""How far a time read from a file may fall before the lane's start, or before the time it follows, and still be
taken as rounding (a recording's times are stamps of one clock, in order)."""
_RAW_TEXT: Final[frozenset[str]] = frozenset({"text", "arguments"})
"""The fields kept exactly as read (the answer and a tool call's arguments: shown through :func:`.printable.printable`
and written as JSON, never raw); every other string field of an event read from a file is made one safe line."""
MAX_COUNT: Final[int] = 10**12
"""The largest count (tokens, a status, a turn) an event read from a file may carry."""

_STR, _INT, _TIME, _OPT_INT, _OPT_TIME, _DICT = "str", "int", "time", "int?", "time?", "dict"
_FIELD_TYPES: Final[dict[str, str]] = {
    "t": _TIME, "turn": _INT, "model": _STR, "endpoint": _STR, "status": _OPT_INT, "request_id": _STR,
    "service_tier": _STR, "text": _STR, "channel": _STR, "tokens": _OPT_INT, "input": _INT, "output": _INT,
    "reasoning": _INT, "cached": _INT, "seg": _STR, "start": _TIME, "end": _TIME, "label": _STR,
    "finish_reason": _STR, "error": _STR, "message": _STR, "retry_after": _OPT_TIME, "id": _STR, "name": _STR,
    "arguments": _STR, "source": _STR, "data": _DICT, "chain": _STR, "chunks": _INT,
}
"""What each event field holds, checked when an event is read from a file (recordings are hostile input)."""

_CHANNELS: Final[dict[str, str]] = {name: name for name in ("content", "reasoning", "tool_args")}

_CHOICES: Final[dict[str, tuple[str, ...]]] = {
    "channel": ("content", "reasoning", "tool_args"),
    "seg": SEGMENT_KINDS,
}


def _field_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the event field ``name``, or ``None`` when it can."""
    want = _FIELD_TYPES.get(name, "")
    if value is None and want.endswith("?"):
        return None
    if want == _STR:
        if not isinstance(value, str):
            return f"{name} is {value!r}, not a string"
        choices = _CHOICES.get(name)
        if choices is not None and value not in choices:
            return f"{name} is {value!r}, not one of {', '.join(choices)}"
        return None
    if want == _DICT:
        return None if isinstance(value, dict) else f"{name} is {value!r}, not an object"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{name} is {value!r}, not a number"
    if want.startswith(_INT):
        if name == "chunks" and (not isinstance(value, int) or not 1 <= value <= MAX_COUNT):
            return f"chunks is {value!r}, not a whole number from 1 to {MAX_COUNT:.0e}"
        if not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            return f"{name} is {value!r}, not a whole number from 0 to {MAX_COUNT:.0e}"
        return None
    if not math.isfinite(value) or abs(value) > MAX_SECONDS:
        return f"{name} is {value!r}, not a time within {MAX_SECONDS:.0e} seconds"
    if value < -TIME_TOLERANCE_S:
        return f"{name} is {value!r}, a time before the lane started"
    return None


def event_from_dict(data: dict[str, Any]) -> Event:
    """The event an object describes, every field checked (type, finite, in range); unknown keys are ignored so
    newer minor versions still load."""
    if not isinstance(data, dict):
        raise EventFormatError(f"not an event object: {data!r:.60}")
    kind = data.get("kind")
    if kind == "delta":  # nearly every line of a recording: checked inline, the same checks as below
        t, text, channel, tokens = data.get("t"), data.get("text"), data.get("channel", "content"), data.get("tokens")
        chunks = data.get("chunks", 1)
        if (isinstance(t, float | int) and not isinstance(t, bool) and -TIME_TOLERANCE_S <= t <= MAX_SECONDS
                and isinstance(text, str) and isinstance(channel, str) and channel in _CHANNELS
                and (tokens is None or (type(tokens) is int and 0 <= tokens <= MAX_COUNT))
                and type(chunks) is int and (chunks == 1 or 1 <= chunks <= len(text))):
            # The channel's one shared string, not the decoder's copy: ~50 bytes less per event held.
            return Delta(t, text, _CHANNELS[channel], tokens, chunks)  # type: ignore[arg-type]
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise EventFormatError(f"unknown event kind {kind!r:.60}")
    names = _FIELDS[kind]  # type: ignore[index]
    given = {k: v for k, v in data.items() if k in names and k != "kind"}
    for name, value in given.items():
        problem = _field_problem(name, value)
        if problem is not None:
            raise EventFormatError(f"bad {kind} event: {problem:.120}")
        if isinstance(value, str) and name not in _RAW_TEXT:
            given[name] = one_line(value)  # a name or an id from a file is shown as it is: never a control sequence
    start, end = given.get("start"), given.get("end")
    if isinstance(start, int | float) and isinstance(end, int | float) and end < start - TIME_TOLERANCE_S:
        raise EventFormatError(f"bad {kind} event: it ends ({end}) before it starts ({start})")
    try:
        event: Event = cls(**given)
    except TypeError as exc:
        raise EventFormatError(f"bad {kind} event: {exc}") from None
    if isinstance(event, Delta) and event.chunks > max(len(event.text), 1):  # each chunk joined holds some text
        raise EventFormatError(f"bad delta event: chunks is {event.chunks}, more than its {len(event.text)} "
                               "characters of text")
    return event


def is_token(event: Event) -> bool:
    """Whether an event carries generated text (a role-only or empty chunk is not a token)."""
    return isinstance(event, Delta) and bool(event.text)


LOOP_SOURCE: Final[str] = "scenario"
"""The ``source`` of the ``Extra`` event a scenario lane ends with (``data``: the scenario, its turns)."""


def loop_end(t: float, name: str, turns: int, **figures: Any) -> Extra:
    """The event a scenario lane ends with when its loop finished (a trace's lane adds its measured
    ``amdahl_max_speedup``)."""
    return Extra(t=t, source=LOOP_SOURCE, data={"scenario": name, "turns": turns, **figures})


PATH_SOURCE: Final[str] = "critical path"
"""The ``source`` of the ``Extra`` events that carry a trace lane's critical path (docs/design.md §12), one per
stretch (``data``: ``seg``, ``start``, ``end``), all at the lane's start: the lane's breakdown follows them."""

PATH_KINDS: Final[frozenset[str]] = frozenset({"model", "tool", "human", "retry", "wait"})


def path_piece(t: float, seg: str, start: float, end: float) -> Extra:
    """One stretch of a trace lane's critical path, given to ``seg``."""
    return Extra(t=t, source=PATH_SOURCE, data={"seg": seg, "start": start, "end": end})


def path_span(event: Event) -> tuple[str, float, float] | None:
    """(kind, start, end) of a critical-path event; ``None`` for any other event, or one whose data is not a
    well-formed stretch (a recording is input like any other)."""
    if not isinstance(event, Extra) or event.source != PATH_SOURCE:
        return None
    seg, start, end = (event.data.get(k) for k in ("seg", "start", "end"))
    if seg not in PATH_KINDS or isinstance(start, bool) or isinstance(end, bool):
        return None
    if not isinstance(start, int | float) or not isinstance(end, int | float):
        return None
    if not math.isfinite(start) or not math.isfinite(end) or end < start:
        return None
    return str(seg), float(start), float(end)


def is_loop_end(event: Event) -> bool:
    """Whether an event marks the end of a scenario lane's loop."""
    return isinstance(event, Extra) and event.source == LOOP_SOURCE


def with_safe_names(event: Event) -> Event:
    """``event`` with every string field but the answer's text and a tool call's arguments made one safe line
    (:func:`.printable.one_line`): what a server or a file names (a model, a tool, an id, an error) is shown as
    it is, never obeyed by a terminal. The same event when nothing needed it."""
    if isinstance(event, Delta | Extra):
        return event
    changed: dict[str, str] = {}
    for name in _FIELDS.get(event.kind, ()):
        value = getattr(event, name, None)
        if isinstance(value, str) and name not in _RAW_TEXT and name != "kind":
            safe = one_line(value)
            if safe != value:
                changed[name] = safe
    return replace(event, **changed) if changed else event  # type: ignore[arg-type]
