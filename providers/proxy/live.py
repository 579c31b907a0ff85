"""A proxy session as the live screen shows it: a live lane per session lane, fed from the proxy's events as a race
listener is; a running breakdown; and each ``--on`` tier's session re-timed from the calls so far (docs/design.md
§13). Nothing here knows about widgets: the screen samples it at frame rate."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from ..metrics.loop import breakdown
from ..metrics.turn import SegmentSpan
from ..model.events import Done, Error, Event, Extra, Segment, is_loop_end
from ..model.tiers import TierSpec
from ..race.live import LaneState, LiveLane
from ..traces.retime import TierProfile, retime_on
from ..traces.to_events import trace_events
from ..traces.tokrace_recording import lane_trace
from .book import PROXY_SOURCE

RETIME_EVERY_S: Final[float] = 1.0
"""How often the re-timed lanes are worked out again (and only when a call ended since)."""

KINDS: Final[tuple[str, ...]] = ("model", "tool", "human", "retry")
"""The breakdown's parts, in the order the screen names them (the rest, connects and waits, counted with model)."""


def lane_tier(data: dict[str, object], index: int) -> TierSpec:
    """A session lane as the lane widgets name it: its session's number and its model."""
    number = data.get("session_number")
    model = str(data.get("model") or "")
    agent = str(data.get("agent") or "")[:40]
    shadow = data.get("shadow")
    if shadow:  # a shadow's lane: the tier it races on is its name
        return TierSpec(name=f"{shadow} · lane {index + 1}", provider="shadow", model=model)
    return TierSpec(name=f"session {number} · lane {index + 1}", provider=agent or "agent", model=model)


@dataclass(slots=True)
class Retimed:
    """One ``--on`` tier's view of the session so far."""

    profile: TierProfile
    lane: LiveLane
    """The session's busiest lane re-timed on the tier, for the timeline (on the shared clock): its finished calls
    re-timed, then what came after them as measured, moved as much earlier as the re-timing saved."""
    source: int = -1
    """The session lane it re-times."""
    ends: dict[int, tuple[float, float]] = field(default_factory=dict)
    """Per session lane: (the measured end, the re-timed end) of its calls finished so far, on the shared clock."""
    done: dict[int, int] = field(default_factory=dict)
    """Per session lane: how many events were read into ``ends``."""


@dataclass(slots=True)
class Verdict:
    """Where the session is, measured and on one tier: "on T this session would be at 6.1 min of 9.4"."""

    tier: str
    measured_s: float
    retimed_s: float

    def sentence(self) -> str:
        minutes = self.measured_s >= 60
        unit, scale = ("min", 60.0) if minutes else ("s", 1.0)
        return (f"on {self.tier} this session would be at {self.retimed_s / scale:.1f} {unit} of "
                f"{self.measured_s / scale:.1f}")


class LiveProxy:
    """The proxy's listener for the screen: ``(lane, event)`` folded into a :class:`LiveLane` per session lane."""

    def __init__(self, profiles: Sequence[TierProfile] = ()) -> None:
        self.lanes: list[LiveLane] = []
        self.events: list[list[Event]] = []
        """Each lane's events, for the re-timing (the recording is the full record)."""
        self.version = 0
        """Bumped on every event, so the screen redraws only when something came."""
        self.retimed = [Retimed(p, self._retimed_lane(p)) for p in profiles]
        self._retimed_at = -RETIME_EVERY_S
        self._finished = 0
        self._finished_seen = -1
        self._main: dict[str, int] = {}
        """Each session's first lane (its agent's own; the others are side calls and sub-agents)."""
        self._last: tuple[float, str] | None = None
        """When the latest call ended, and what the time after it is while no call runs (tool, human, retry)."""

    def __call__(self, lane: int, event: Event) -> None:
        while len(self.lanes) <= lane:
            index = len(self.lanes)
            self.lanes.append(LiveLane(TierSpec(name=f"lane {index + 1}", provider="agent"), None, loop=True))
            self.events.append([])
        live = self.lanes[lane]
        if isinstance(event, Extra) and event.source == PROXY_SOURCE:
            live.tier = lane_tier(event.data, lane)
            self._main.setdefault(str(event.data.get("session")), lane)
        live.on_event(event)
        self.events[lane].append(event)
        if isinstance(event, Done | Error):
            self._finished += 1
            self._last = (event.t, "retry" if isinstance(event, Error) else
                          "tool" if event.finish_reason == "tool_calls" else "human")
            if isinstance(event, Done) and live.state == "waiting":  # an end of turn: the person's, or nothing
                live.hold("human" if lane in self._main.values() else "idle")
        for retimed in self.retimed:
            if retimed.source == lane and isinstance(retimed.lane, ShiftedLane):
                retimed.lane.on_event(shifted(event, -retimed.lane.shift))
        self.version += 1

    @property
    def start(self) -> float | None:
        """When the first call began (the shared clock)."""
        starts = [lane.first_t for lane in self.lanes if lane.first_t is not None]
        return min(starts) if starts else None

    def calls(self) -> int:
        return sum(len(lane.turns) for lane in self.lanes)

    def tokens(self) -> tuple[int, int]:
        """(input, output) tokens of every call so far."""
        inputs = sum(turn.usage.input for lane in self.lanes for turn in lane.turns if turn.usage is not None)
        return inputs, sum(lane.tokens for lane in self.lanes)

    def breakdown(self, now: float) -> dict[str, float]:
        """Seconds per kind: each lane's from its first call to its last call's end (or ``now`` while one runs),
        and, while no call runs, the time since the latest call ended as what it is (tool, human, retry)."""
        totals = dict.fromkeys(KINDS, 0.0)
        running = False
        for lane in self.lanes:
            if lane.first_t is None:
                continue
            in_flight = bool(lane.turns) and lane.turns[-1].end is None
            running = running or in_flight
            ends = [turn.end for turn in lane.turns if turn.end is not None]
            end = max(now, lane.last_t) if in_flight or not ends else max(ends)
            spans: list[SegmentSpan] = lane.segments(now)
            for kind, seconds in breakdown(spans, lane.first_t, end).items():
                totals[kind if kind in totals else "model"] += seconds
        if not running and self._last is not None and now > self._last[0]:
            totals[self._last[1]] += now - self._last[0]
        return totals

    def verdicts(self, now: float) -> list[Verdict]:
        """Each ``--on`` tier's verdict on the session so far (re-timed at most every ``RETIME_EVERY_S``)."""
        start = self.start
        if start is None or not self.retimed:
            return []
        if now - self._retimed_at >= RETIME_EVERY_S and self._finished != self._finished_seen:
            self._retimed_at, self._finished_seen = now, self._finished
            for retimed in self.retimed:
                self._retime(retimed)
        out = []
        for retimed in self.retimed:
            # after the session's last finished call (calls in flight, a person reading): as measured
            measured_end, retimed_end = max(retimed.ends.values(), default=(start, start))
            end = max([retimed_end + max(now - measured_end, 0.0), *(e for _, e in retimed.ends.values())])
            out.append(Verdict(retimed.profile.name, max(now - start, 0.0), end - start))
        return out

    def _retime(self, retimed: Retimed) -> None:
        busiest, most = None, -1
        for index, events in enumerate(self.events):
            cut = last_finished(events)
            if cut == 0:
                continue
            if retimed.done.get(index) != cut:
                first = events[0].t
                trace = lane_trace(events[:cut])
                on = retime_on(trace, retimed.profile)
                measured = first + max((s.end for s in trace.steps), default=0.0)
                retimed.ends[index] = (measured, first + max((s.end for s in on.steps), default=0.0))
                retimed.done[index] = cut
            if len(self.lanes[index].turns) > most:
                busiest, most = index, len(self.lanes[index].turns)
        if busiest is not None:
            events = self.events[busiest]
            cut = last_finished(events)
            measured_end, retimed_end = retimed.ends[busiest]
            on = retime_on(lane_trace(events[:cut]), retimed.profile)
            lane = ShiftedLane(retimed.profile, measured_end - retimed_end)
            for event in trace_events(on, idle_cap_s=float("inf")):  # (on the shared clock: nothing cut)
                if not is_loop_end(event):
                    lane.on_event(shifted(event, events[0].t))
            for event in events[cut:]:
                lane.on_event(shifted(event, -lane.shift))
            retimed.lane, retimed.source = lane, busiest

    @staticmethod
    def _retimed_lane(profile: TierProfile) -> LiveLane:
        return ShiftedLane(profile, 0.0)


class ShiftedLane(LiveLane):
    """A re-timed lane on the shared timeline: ``shift`` seconds ahead of the session, so at the session's ``now``
    it stands at ``now - shift`` (a call in flight grows only to there)."""

    def __init__(self, profile: TierProfile, shift: float) -> None:
        super().__init__(TierSpec(name=f"on {profile.name}", provider="re-timed", model=profile.model), None,
                         loop=True)
        self.shift = shift

    def segments(self, now: float) -> list[SegmentSpan]:
        return super().segments(now - self.shift)

    def state_at(self, now: float) -> LaneState:
        return super().state_at(now - self.shift)


def shifted(event: Event, offset: float) -> Event:
    """The event ``offset`` seconds later (a span's start and end too)."""
    if isinstance(event, Segment):
        return dataclasses.replace(event, t=event.t + offset, start=event.start + offset, end=event.end + offset)
    return dataclasses.replace(event, t=event.t + offset)


def last_finished(events: Sequence[Event]) -> int:
    """How many of a lane's events belong to its calls that have ended (up to the last end)."""
    for i in range(len(events) - 1, -1, -1):
        if isinstance(events[i], Done | Error):
            return i + 1
    return 0
