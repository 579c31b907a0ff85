"""The summary of a finished race: who finished first and by how much, and every lane's speed-up against the
slowest (the words for it are :func:`~tokrace.providers.export.tables.summary_pieces`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..model import tokens
from ..model.events import Delta, Request, is_loop_end
from .live import LiveLane, LiveRace
from .race import LaneRun


@dataclass(frozen=True, slots=True)
class LaneResult:
    """One lane's place in the race summary."""

    name: str
    e2e: float
    decode: float | None
    tokens_speedup: float | None
    """This lane's decode rate ÷ the slowest lane's."""
    turn_speedup: float
    """The slowest lane's e2e ÷ this lane's (of the whole loop, in a scenario)."""


@dataclass(frozen=True, slots=True)
class RaceSummary:
    """Who finished first, by how much, and every lane's speed-up against the slowest."""

    first: str | None = None
    first_e2e: float | None = None
    runner_up: str | None = None
    lead_s: float | None = None
    slowest: str | None = None
    """The lane every speed-up is against: the reference lane when the race has one, else the slowest."""
    results: list[LaneResult] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    """Lanes stopped before their end (by the user): not failures, but not finishers either."""
    loop: bool = False
    """The lanes played a scenario's loop: end to end is the whole loop, not one turn."""


def race_summary(lanes: Sequence[LiveLane]) -> RaceSummary:
    """The summary of a finished race; lanes that failed are named apart and left out of the comparison."""
    ok = [(lane, lane.e2e) for lane in lanes if lane.ok and lane.e2e is not None]
    out = [lane for lane in lanes if not (lane.ok and lane.e2e is not None)]
    failed = [lane.tier.name for lane in out if lane.state != "stopped"]
    stopped = [lane.tier.name for lane in out if lane.state == "stopped"]
    loop = any(lane.loop for lane in lanes)
    if not ok:
        return RaceSummary(failed=failed, stopped=stopped, loop=loop)
    ordered = sorted(ok, key=lambda pair: pair[1] or 0.0)
    first, first_e2e = ordered[0]
    # Against the race's reference lane when it finished (a trace as recorded), else against the slowest.
    slow_lane, slow_e2e = next((pair for pair in ordered if pair[0].tier.reference), ordered[-1])
    slow_decode = slow_lane.decode_rate()
    results = []
    for lane, e2e in ordered:
        assert e2e is not None
        decode = lane.decode_rate()
        tokens_x = decode / slow_decode if decode is not None and slow_decode else None
        results.append(LaneResult(lane.tier.name, e2e, decode, tokens_x,
                                  (slow_e2e or 0.0) / e2e if e2e > 0 else 1.0))
    runner_up = ordered[1] if len(ordered) > 1 else None
    return RaceSummary(first=first.tier.name, first_e2e=first_e2e,
                       runner_up=runner_up[0].tier.name if runner_up else None,
                       lead_s=(runner_up[1] or 0.0) - (first_e2e or 0.0) if runner_up else None,
                       slowest=slow_lane.tier.name if len(ordered) > 1 else None, results=results,
                       failed=failed, stopped=stopped, loop=loop)


def summary_of_run(lanes: Sequence[LaneRun]) -> RaceSummary:
    """The summary the race screen shows at the end of this run, from its events: they are fed to the same live
    model the screen reads, with the tokenizer loaded first where a lane's pieces came without counts."""
    loops = [any(is_loop_end(e) for e in lane.events) for lane in lanes]
    expected = [None if loop else (sum(1 for e in lane.events if isinstance(e, Request)) or None)
                for lane, loop in zip(lanes, loops, strict=True)]
    live = LiveRace([lane.tier for lane in lanes], expected, loops=loops)
    for lane, view in zip(lanes, live.lanes, strict=True):
        if any(isinstance(e, Delta) and e.text and e.tokens is None for e in lane.events):
            name, encoding = tokens.get_encoding(lane.tier.model)
            if encoding is not None:
                view.set_encoding(name, encoding)
        for event in lane.events:
            view.on_event(event)
    live.finish()
    return race_summary(live.lanes)
