"""The proxy's sessions: each model call placed on a lane of its agent's session, and the time between one call's end
and the next call's start on a lane named for what it was (tool, human, retry; docs/design.md §12, §13)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from ..model.events import Event, Extra, Segment, SegmentKind, loop_end
from .http1 import Head
from .meter import CallMeter, MeterQueue

Sink = Callable[[int, Event], None]
"""Where each lane's events go (the recorder, the live model): ``(lane, event)``."""

PROXY_SOURCE: Final[str] = "proxy"
"""The ``extra`` event source naming a lane's session and agent when the lane opens."""


@dataclass(slots=True)
class Lane:
    """One lane of a session: calls one after the other (a call made while the lane is busy takes another)."""

    index: int
    session: str
    model: str
    busy: bool = False
    turns: int = 0
    last_end: float | None = None
    last_finish: str | None = None
    last_digest: str = ""


@dataclass(slots=True)
class CallRecord:
    """One finished call, for the closing table."""

    lane: int
    session: str
    model: str
    status: int
    finish: str
    start: float
    first_byte: float | None
    end: float


@dataclass(slots=True)
class Book:
    """Places calls on lanes and writes their events, with the gaps between them, to ``sink``."""

    sink: Sink
    zero: float | None = None
    """The shared clock's origin (``perf_counter``): when the proxy started listening (so every call's times are
    0 or more, whichever call is read first), else the first call's reading."""
    lanes: list[Lane] = field(default_factory=list)
    sessions: dict[str, int] = field(default_factory=dict)
    """Each session's number (in order of appearance)."""
    calls: list[CallRecord] = field(default_factory=list)
    live: int = 0
    seen: Callable[[Head], None] | None = None
    """Shown every request's head first (to learn the secrets it carries before anything of it is written)."""

    opened: Callable[[CallMeter], None] | None = None
    """Told of each agent's call as it opens (its request's copy still on it): what a shadow sends on."""
    work: MeterQueue = field(default_factory=MeterQueue)
    """Every call's measuring, in the order the relay handed it on."""

    def observer(self, method: str, peer: tuple[str, int] | None, shadow: str = "") -> CallMeter:
        meter = CallMeter(method, self._zero, self._begin, self._end, self.seen, self.work)
        meter.shadow = shadow
        return meter

    def _zero(self) -> float:
        if self.zero is None:
            self.zero = time.perf_counter()
        return self.zero

    def _begin(self, call: CallMeter) -> Callable[[Event], None]:
        """Open a call: its lane (the session's idle lane for its model, else a new one), and the gap before it."""
        facts = call.facts
        session = facts.session or f"agent {facts.agent or 'unknown'}"
        self.sessions.setdefault(session, len(self.sessions) + 1)
        lane = next((ln for ln in self.lanes if ln.session == session and ln.model == facts.model and not ln.busy),
                    None)
        start = call.arrived - self._zero()
        if lane is None:
            lane = Lane(len(self.lanes), session, facts.model)
            self.lanes.append(lane)
            opened = {"session": session, "session_number": self.sessions[session], "model": facts.model,
                      "agent": facts.agent, "upstream": call.upstream}
            if call.shadow:
                opened["shadow"] = call.shadow
            self.sink(lane.index, Extra(t=start, source=PROXY_SOURCE, data=opened))
        elif lane.last_end is not None and start > lane.last_end:
            kind = gap_kind(lane, facts.digest, facts.retry_header)
            self.sink(lane.index, Segment(t=start, seg=kind, start=lane.last_end, end=start, label=_LABELS[kind]))
        lane.busy = True
        call.turn = lane.turns
        lane.turns += 1
        self.live += 1
        call_lane = lane
        call.lane = lane.index

        def emit(event: Event) -> None:
            self.sink(call_lane.index, event)

        if self.opened is not None and not call.shadow:
            self.opened(call)
        return emit

    def _end(self, call: CallMeter) -> None:
        index = call.lane
        if index is None:
            return
        lane = self.lanes[index]
        zero = self._zero()
        end = (call.ended_at or time.perf_counter()) - zero
        lane.busy = False
        lane.last_end = end
        lane.last_finish = call.finish
        lane.last_digest = call.facts.digest
        self.live -= 1
        self.calls.append(CallRecord(lane.index, lane.session, call.facts.model, call.status, call.finish or "",
                                     call.arrived - zero, None if call.first_byte is None else call.first_byte - zero,
                                     end))


    def close(self) -> None:
        """End every lane's loop at its last call's end (a session is an agent loop: replay and export read it
        as one, whole)."""
        for lane in self.lanes:
            if lane.last_end is not None and not lane.busy:
                self.sink(lane.index, loop_end(lane.last_end, SESSION_LOOP, lane.turns))


SESSION_LOOP: Final[str] = "proxy session"
"""The recording's ``scenario``: what replay, export and traces read a proxied session's lanes as (a loop)."""

_LABELS: Final[dict[SegmentKind, str]] = {"tool": "tool", "human": "human", "retry": "retry"}


def gap_kind(lane: Lane, digest: str, retry_header: bool) -> SegmentKind:
    """What the time before a lane's next call was: a retry when the same request comes again, a retry header says
    so or the call before failed; a tool after a tool call; else the person's (after an end of turn)."""
    if retry_header or (digest and digest == lane.last_digest) or lane.last_finish in ("error", "cancelled"):
        return "retry"
    if lane.last_finish == "tool_calls":
        return "tool"
    return "human"
