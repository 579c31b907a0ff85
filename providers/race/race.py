"""The race: N lanes run one prompt concurrently, one tier each, with events fanned out to listeners.

Providers are built and prepared before the start so lanes start on equal footing. A lane that fails ends with an
``Error`` event and never stops or slows the others.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..adapters import Provider, create_provider
from ..model.errors import TokraceError
from ..model.eventlog import EventLog
from ..model.events import Delta, DeltaRun, Done, Error, Event, Request, is_loop_end, with_safe_names
from ..model.masking import Masker
from ..model.messages import TurnRequest
from ..model.tiers import TierSpec
from ..recording import secret_values
from ..timing.clock import Clock, LaneClock

OFFLINE_PROVIDERS = frozenset({"synthetic", "replay"})
"""Providers whose text never came from a server just now (and was masked when it was recorded)."""


class Loop(Protocol):
    """A whole agent loop each lane plays instead of one request (a
    :class:`tokrace.providers.loop.scenario.Scenario`)."""

    async def play(self, race: Race, index: int, provider: Provider, clock: LaneClock) -> None:
        """Play the loop on lane ``index``, emitting its events through ``race``."""


Listener = Callable[[int, Event], None]
"""Called with (lane index, event) for every event as it happens; must be quick and must not raise."""


class BrokenProvider(Provider):
    """Stands in for a tier that could not be set up (a missing key, say): its lane fails at once, with the reason,
    and the other lanes race on."""

    name = "broken"

    def __init__(self, tier: TierSpec, message: str) -> None:
        super().__init__(tier)
        self.message = message

    async def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        t = clock.now()
        yield Request(t=t, turn=request.turn, model=self.tier.model)
        yield Error(t=t, error="setup", message=self.message)


def one_line(exc: BaseException) -> str:
    """An exception as one line: our own errors as they read, anything else with its type."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text if isinstance(exc, TokraceError) and text else f"{type(exc).__name__}: {text}".rstrip(": ")


async def prepare_providers(tiers: Sequence[TierSpec], factory: Callable[[TierSpec], Provider] = create_provider,
                            warm: bool = False) -> list[Provider]:
    """Build and prepare a provider per tier; a tier that cannot be built or prepared gets a
    :class:`BrokenProvider`, so the screen and bench fail that lane alone, the same way."""
    providers: list[Provider] = []
    for tier in tiers:
        try:
            providers.append(factory(tier))
        except Exception as exc:
            providers.append(BrokenProvider(tier, one_line(exc)))
    results = await asyncio.gather(*(p.prepare(warm) for p in providers), return_exceptions=True)
    for i, result in enumerate(results):
        if isinstance(result, Exception):
            await providers[i].aclose()
            providers[i] = BrokenProvider(tiers[i], one_line(result))
        elif isinstance(result, BaseException):
            raise result
    return providers


@dataclass(slots=True)
class LaneRun:
    """One lane's run: its tier and every event it produced (kept in compact columns: see :mod:`.eventlog`)."""

    index: int
    tier: TierSpec
    events: EventLog = field(default_factory=EventLog)
    wall_origin: float | None = None
    """The wall clock (Unix seconds) at the lane's time 0, read when the race started; ``None`` before that."""

    @property
    def ok(self) -> bool:
        return any(isinstance(e, Done) for e in self.events) and not any(isinstance(e, Error) for e in self.events)


class Race:
    """Runs one request (or, with a scenario, one whole agent loop) on every tier at once."""

    def __init__(self, tiers: Sequence[TierSpec], request: TurnRequest, clock: Clock,
                 listeners: Sequence[Listener] = (), providers: Sequence[Provider] | None = None,
                 scenario: Loop | None = None) -> None:
        self.tiers = list(tiers)
        self.request = request
        self.scenario = scenario
        self.clock = clock
        self.listeners: list[Listener] = list(listeners)
        self.providers: list[Provider] = list(providers) if providers is not None else []
        self.lanes = [LaneRun(i, tier) for i, tier in enumerate(self.tiers)]
        self._masks = [Masker(secret_values([tier]), shapes=tier.provider not in OFFLINE_PROVIDERS)
                       for tier in self.tiers]
        self.origin = 0.0
        self._tasks: list[asyncio.Task[None]] = []

    async def prepare(self, warm: bool = False) -> None:
        """Build every provider and let each do its slow set-up before the start. Errors here are config errors."""
        if not self.providers:
            self.providers = [create_provider(tier) for tier in self.tiers]
        await asyncio.gather(*(p.prepare(warm) for p in self.providers))

    def emit(self, lane: int, event: Event) -> None:
        """Record an event of a lane and hand it to every listener, its secrets masked (a server may echo a key,
        a header or a URL's secret back into its text)."""
        mask = self._masks[lane]
        if mask.active:
            event = mask(event)
        event = with_safe_names(event)
        self.lanes[lane].events.append(event)
        for listener in self.listeners:
            listener(lane, event)

    async def run(self) -> list[LaneRun]:
        """Run all lanes to the end (or until stopped) and return their events."""
        if not self.providers:
            await self.prepare()
        self.origin = self.clock.now()
        wall = time.time()  # read beside the origin: a run's wall-clock start is this plus its lane time
        for lane in self.lanes:
            lane.wall_origin = wall
        self._tasks = [asyncio.create_task(self._run_lane(i)) for i in range(len(self.tiers))]
        await asyncio.gather(*self._tasks, return_exceptions=True)
        return self.lanes

    def stop(self) -> None:
        """Stop every lane still running; each ends with a ``stopped`` error event."""
        for task in self._tasks:
            task.cancel()

    async def aclose(self) -> None:
        await asyncio.gather(*(p.aclose() for p in self.providers), return_exceptions=True)

    def lane_request(self, index: int) -> TurnRequest:
        """The race's request as a lane sends it: a tier's own ``max_tokens`` limits that lane only."""
        limit = self.tiers[index].max_tokens
        return self.request if limit is None else dataclasses.replace(self.request, max_tokens=limit)

    async def _run_lane(self, index: int) -> None:
        provider = self.providers[index]
        # A lane that stamps its own planned times needs no precise wake-ups (see LaneClock).
        clock = LaneClock(self.clock, self.origin, coarse=provider.name in OFFLINE_PROVIDERS)
        try:
            if self.scenario is not None and not provider.plays_whole_lane:
                await self.scenario.play(self, index, provider, clock)
            else:
                await self.run_turn(index, provider, clock, self.lane_request(index))
        except asyncio.CancelledError:
            self.emit(index, Error(t=clock.elapsed(), error="stopped", message="stopped before the end"))
        except Exception as exc:  # a failing lane must never take the race down
            from ..model.masking import redact  # an unexpected message may quote a request's headers

            message = redact(f"{type(exc).__name__}: {exc}", secret_values([self.tiers[index]]))
            self.emit(index, Error(t=clock.elapsed(), error="internal", message=message))

    def emit_many(self, lane: int, deltas: list[Delta] | DeltaRun) -> None:
        """:meth:`emit` for the deltas a lane has due at once (a synthetic lane's wake-up, as a :class:`DeltaRun`;
        an HTTP lane's reads), in one go: each listener gets all of them, in order, through its
        ``on_deltas(lane, deltas)`` when it has one (the live model, the recorder), else one call per event. Every
        listener sees the same events in the same order as through :meth:`emit`; only which listener sees them
        first differs."""
        events: Sequence[Event] = self._masks[lane].deltas(deltas)
        self.lanes[lane].events.extend(events)
        for listener in self.listeners:
            many: Callable[[int, Sequence[Event]], None] | None = getattr(listener, "on_deltas", None)
            if many is not None:
                many(lane, events)
            else:
                for event in events:
                    listener(lane, event)

    async def run_turn(self, index: int, provider: Provider, clock: LaneClock, request: TurnRequest) -> bool:
        """Stream one turn of a lane; True when it ended normally."""
        batched: Callable[[TurnRequest, Clock], AsyncIterator[Event | list[Delta] | DeltaRun]] | None = getattr(
            provider, "stream_batched", None)
        stream = batched(request, clock) if batched is not None else provider.stream(request, clock)
        try:
            return await self._play(index, provider, clock, request, stream)
        finally:  # closed now, not when the loop gets round to it: what it holds (a huge last event) goes with it
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()

    async def _play(self, index: int, provider: Provider, clock: LaneClock, request: TurnRequest,
                    stream: AsyncIterator[Event | list[Delta] | DeltaRun]) -> bool:
        """:meth:`run_turn`'s events, from ``stream``."""
        seen_request = False
        emit = self.emit
        async for item in stream:
            # (each let go once handed on: not held while the next one is read, a huge one beside the next)
            if seen_request and type(item) is Delta:  # nearly every event: straight through
                emit(index, item)
                del item
                continue
            if type(item) is DeltaRun or type(item) is list:  # deltas due at once: after the request, as always
                if seen_request:
                    self.emit_many(index, item)
                    del item
                    continue
                items: list[Event] = list(item)
            else:
                items = [item]  # type: ignore[list-item]
            for event in items:
                if seen_request and type(event) is Delta:
                    emit(index, event)
                    continue
                if isinstance(event, Request):
                    seen_request = True
                elif not seen_request and not provider.plays_whole_lane:
                    # A recorded lane carries its own requests (a loop may even start with a person or a tool).
                    self.emit(index, Request(t=event.t, turn=request.turn, model=provider.tier.model))
                    seen_request = True
                self.emit(index, event)
                if isinstance(event, Error):
                    clock.reach(event.t)
                    return False
                if isinstance(event, Done) and not provider.plays_whole_lane:
                    clock.reach(event.t)  # a planned lane's next step starts where this turn was planned to end
                    return True
        last = self.lanes[index].events[-1] if self.lanes[index].events else None
        if isinstance(last, Done) or (last is not None and is_loop_end(last)):
            return True
        self.emit(index, Error(t=clock.now(), error="incomplete",
                               message="the stream ended without its final event; the answer may be cut short"))
        return False
