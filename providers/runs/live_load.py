"""A load on the screen: the live state of each tier under load (one lane each, never one per stream) and the runner
that starts and stops the load (docs/design.md §14)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Final

from ..adapters import Provider, create_provider
from ..model.events import Delta, DeltaRun, Event
from ..model.messages import TurnRequest
from ..model.tiers import TierSpec
from ..race.race import Listener, one_line
from ..timing.clock import Clock
from .load import LoadPlan, LoadResult, RequestRow, run_load

TTFT_KEPT: Final[int] = 100_000
"""The most TTFTs a lane keeps for its distribution (the latest; the final figures are the rows')."""


class _Counter:
    """One request's output so far, as its deltas arrive: the provider's count where it gives one, else a chunk
    a token (the screen's running figure; the request's own metrics replace it once it ends)."""

    __slots__ = ("tokens",)

    def __init__(self) -> None:
        self.tokens = 0

    def __call__(self, lane: int, event: Event) -> None:
        if type(event) is Delta:
            self.tokens += event.tokens if event.tokens is not None else event.chunks

    def on_deltas(self, lane: int, deltas: Sequence[Delta] | DeltaRun) -> None:
        for event in deltas:
            self(lane, event)


class LiveTierLoad:
    """What one tier's lane shows: the level, the requests done, failed and under way, the tokens delivered so
    far, and the TTFTs of the requests that succeeded (for the distribution)."""

    def __init__(self, tier: TierSpec) -> None:
        self.tier = tier
        self.streams = 0
        self.level(0)

    def level(self, streams: int) -> None:
        """A new level begins: everything counted so far belonged to the last one."""
        self.streams = streams
        self.started: float | None = None
        self.ended: float | None = None
        """The load clock when the level's last request ended (the window's end)."""
        self.done = 0
        self.failed = 0
        self.first_error: str | None = None
        self.tokens_done = 0
        self.ttfts: list[float] = []
        self._under_way: dict[int, _Counter] = {}

    @property
    def under_way(self) -> int:
        return len(self._under_way)

    def tokens(self) -> int:
        """Output tokens delivered so far in this level: the ended requests' counts, and those under way so far."""
        return self.tokens_done + sum(c.tokens for c in self._under_way.values())

    def delivered_tok_s(self, now: float) -> float | None:
        """Tokens delivered ÷ the time since the level started (to its last request's end once it is over)."""
        if self.started is None:
            return None
        span = (self.ended if self.ended is not None else now) - self.started
        return self.tokens() / span if span > 0 else None

    def started_request(self, stream: int, origin: float) -> Listener:
        if self.started is None:
            self.started = origin
        counter = self._under_way[stream] = _Counter()
        return counter

    def ended_request(self, row: RequestRow) -> None:
        self._under_way.pop(row.stream, None)
        self.done += 1
        self.tokens_done += row.output_tokens
        if row.ok and row.ttft_s is not None:
            if len(self.ttfts) >= TTFT_KEPT:
                del self.ttfts[: TTFT_KEPT // 10]
            self.ttfts.append(row.ttft_s)
        elif not row.ok:
            self.failed += 1
            if self.first_error is None:
                self.first_error = row.error
        if self.started is not None:
            self.ended = self.started + row.end_s if self.ended is None else max(self.ended, self.started + row.end_s)


class LiveLoad:
    """Every tier's live state under load (a :class:`~.load.LoadWatch`)."""

    def __init__(self, tiers: Sequence[TierSpec]) -> None:
        self.lanes = [LiveTierLoad(tier) for tier in tiers]
        self.level_streams = 0
        self.levels_done = 0

    def level(self, streams: int) -> None:
        if self.level_streams:
            self.levels_done += 1
        self.level_streams = streams
        for lane in self.lanes:
            lane.level(streams)

    def request_started(self, tier: int, stream: int, origin: float) -> Listener | None:
        return self.lanes[tier].started_request(stream, origin)

    def request_ended(self, tier: int, row: RequestRow) -> None:
        self.lanes[tier].ended_request(row)


class LoadRunner:
    """Runs one load for the screen on a clock (real time, or virtual time in tests): ``live`` while it runs,
    ``result`` once it is over (the figures bench prints), ``problem`` when it could not run."""

    def __init__(self, tiers: Sequence[TierSpec], request: TurnRequest, plan: LoadPlan, clock: Clock, *,
                 factory: Callable[[TierSpec], Provider] = create_provider, warm: bool = False,
                 stall_threshold_s: float = 0.25) -> None:
        self.tiers = list(tiers)
        self.request = request
        self.plan = plan
        self.clock = clock
        self.factory = factory
        self.warm = warm
        self.stall_threshold_s = stall_threshold_s
        self.live = LiveLoad(self.tiers)
        self.result: LoadResult | None = None
        self.problem: str | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def finished(self) -> bool:
        return self.result is not None or self.problem is not None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            self.result = await run_load(self.tiers, self.request, self.plan, warm=self.warm, watch=self.live,
                                         factory=self.factory, on_level=self.live.level,
                                         stall_threshold_s=self.stall_threshold_s, clock=self.clock)
        except Exception as exc:  # shown on the screen, in one line
            self.problem = one_line(exc)

    async def wait_finished(self) -> None:
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        """Stop the load (every request under way ends as stopped); nothing is reported."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
