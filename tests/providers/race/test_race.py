"""The race: lanes run one prompt concurrently on equal footing; a failing lane never stops or slows the others."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
from conftest import kinds, race_virtually, synthetic

from tokrace.providers.adapters import Provider
from tokrace.providers.adapters.synthetic import SyntheticProvider
from tokrace.providers.model.events import Delta, Done, Error, Event, Headers, Request
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.race import Race
from tokrace.providers.timing.clock import Clock, VirtualClock


class Exploding(Provider):
    """Streams a token, then raises like a buggy adapter would."""

    name = "exploding"

    async def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        yield Request(t=clock.now())
        yield Delta(t=await clock.sleep_until(0.1), text="Hi")
        raise RuntimeError("adapter bug")


class Leaking(Provider):
    """Raises with the key in its message, like an adapter bug that quotes the request's headers."""

    name = "leaking"

    async def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        yield Request(t=clock.now())
        raise RuntimeError(f"bad header {{'authorization': '{os.environ['TOKRACE_RACE_KEY']}'}}")


class Unfinished(Provider):
    """Streams without a Request first and stops without Done or Error."""

    name = "unfinished"

    async def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        yield Headers(t=await clock.sleep_until(0.05))
        yield Delta(t=await clock.sleep_until(0.1), text="Hi")


class SlowToPrepare(SyntheticProvider):
    """A synthetic lane whose set-up takes a (virtual) second, like creating an HTTP client."""

    def __init__(self, tier: TierSpec, clock: VirtualClock) -> None:
        super().__init__(tier)
        self.clock = clock

    async def prepare(self, warm: bool = False) -> None:
        await self.clock.sleep_until(self.clock.now() + 1.0)


def tier(name: str) -> TierSpec:
    return TierSpec(name=name, provider="custom")


def test_every_lane_runs_the_prompt_and_ends_done() -> None:
    lanes = race_virtually([synthetic("a", tok_s=100), synthetic("b", tok_s=50, ttft_ms=100)], max_tokens=20)
    assert [lane.ok for lane in lanes] == [True, True]
    assert [lane.tier.name for lane in lanes] == ["a", "b"]
    assert all(kinds(lane.events)[0] == "request" and kinds(lane.events)[-1] == "done" for lane in lanes)


def test_listeners_see_every_event_of_every_lane_in_time_order() -> None:
    seen: list[tuple[int, Event]] = []
    lanes = race_virtually([synthetic("a", tok_s=100), synthetic("b", tok_s=70, ttft_ms=300)], max_tokens=30,
                           listeners=[lambda lane, event: seen.append((lane, event))])
    assert [e for lane, e in seen if lane == 0] == lanes[0].events
    assert [e for lane, e in seen if lane == 1] == lanes[1].events
    times = [e.t for _, e in seen]
    assert times == sorted(times)
    assert {lane for lane, _ in seen[:10]} == {0, 1}


def test_a_failing_lane_neither_stops_nor_slows_the_others() -> None:
    healthy = [synthetic("steady", tok_s=120, jitter=0.2, seed=5), synthetic("other", tok_s=300, ttft_ms=50)]
    alone = race_virtually(healthy, max_tokens=80)
    with_failure = race_virtually([healthy[0], synthetic("flaky", tok_s=200, fail_after_tokens=10), healthy[1]],
                                  max_tokens=80)
    assert not with_failure[1].ok
    assert isinstance(with_failure[1].events[-1], Error)
    assert with_failure[0].events == alone[0].events
    assert with_failure[2].events == alone[1].events


def test_an_exception_in_an_adapter_becomes_an_error_event_on_its_lane_only() -> None:
    async def go() -> Race:
        clock = VirtualClock()
        providers = [Exploding(tier("boom")), SyntheticProvider(synthetic("fine", tok_s=100))]
        race = Race([p.tier for p in providers], TurnRequest("Hi", max_tokens=10), clock, providers=providers)
        await clock.drive(race.run())
        return race

    race = asyncio.run(go())
    boom, fine = race.lanes
    assert kinds(boom.events) == ["request", "delta", "error"]
    error = boom.events[-1]
    assert isinstance(error, Error) and error.error == "internal" and "adapter bug" in error.message
    assert fine.ok and len([e for e in fine.events if isinstance(e, Delta)]) == 10


def test_an_unexpected_error_message_never_shows_the_lanes_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKRACE_RACE_KEY", "plainvaluenoprefix77")
    leaky = TierSpec(name="leaky", provider="custom", api_key_env="TOKRACE_RACE_KEY")

    async def go() -> Race:
        clock = VirtualClock()
        race = Race([leaky], TurnRequest("Hi", max_tokens=10), clock, providers=[Leaking(leaky)])
        await clock.drive(race.run())
        return race

    error = asyncio.run(go()).lanes[0].events[-1]
    assert isinstance(error, Error) and error.error == "internal"
    assert "plainvaluenoprefix77" not in error.message and "[redacted]" in error.message


def test_a_stream_without_its_request_or_final_event_is_completed_by_the_race() -> None:
    async def go() -> Race:
        clock = VirtualClock()
        provider = Unfinished(tier("cut"))
        race = Race([provider.tier], TurnRequest("Hi"), clock, providers=[provider])
        await clock.drive(race.run())
        return race

    (lane,) = asyncio.run(go()).lanes
    assert kinds(lane.events) == ["request", "headers", "delta", "error"]
    assert lane.events[0].t == 0.05
    error = lane.events[-1]
    assert isinstance(error, Error) and error.error == "incomplete"


def test_lanes_start_on_equal_footing_after_every_provider_is_prepared() -> None:
    async def go() -> Race:
        clock = VirtualClock()
        providers = [SlowToPrepare(synthetic("slow setup", tok_s=100), clock),
                     SyntheticProvider(synthetic("quick setup", tok_s=100))]
        race = Race([p.tier for p in providers], TurnRequest("Hi", max_tokens=5), clock, providers=providers)
        await clock.drive(race.prepare())
        await clock.drive(race.run())
        return race

    race = asyncio.run(go())
    assert race.origin == 1.0
    slow, quick = race.lanes
    assert [e.t for e in slow.events] == [e.t for e in quick.events]
    assert slow.events[0] == Request(t=0.0, model="synthetic", endpoint="synthetic")


def test_stop_ends_every_running_lane_with_a_stopped_error() -> None:
    async def go() -> Race:
        clock = VirtualClock()
        race = Race([synthetic("a", tok_s=10), synthetic("b", tok_s=10)], TurnRequest("Hi", max_tokens=100), clock)
        task = asyncio.create_task(race.run())
        await clock.advance_to(1.0)
        race.stop()
        await task
        return race

    for lane in asyncio.run(go()).lanes:
        last = lane.events[-1]
        assert isinstance(last, Error) and last.error == "stopped"
        assert 0 < len([e for e in lane.events if isinstance(e, Delta)]) < 100


def test_a_tiers_own_max_tokens_limits_its_lane_only() -> None:
    lanes = race_virtually([synthetic("short", tok_s=100, max_tokens=5), synthetic("default", tok_s=100)],
                           max_tokens=20)
    counts = [len([e for e in lane.events if isinstance(e, Delta)]) for lane in lanes]
    assert counts == [5, 20]
    assert all(isinstance(lane.events[-1], Done) for lane in lanes)


class Noting(Provider):
    """Notes the clock its lane gets, then ends at once."""

    name = "openai"
    clocks: ClassVar[list[Any]] = []

    async def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        Noting.clocks.append(clock)
        yield Request(t=clock.now())
        yield Done(t=clock.now())


async def test_only_lanes_that_stamp_their_planned_times_wake_coarsely() -> None:
    """Synthetic and replay lanes wake on a coarse grid on the real clock; a lane reading a server (or anything
    else) keeps precise wake-ups."""
    from tokrace.providers.timing.clock import LaneClock, RealClock

    seen: list[LaneClock] = []

    class NotingSynthetic(SyntheticProvider):
        async def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
            assert isinstance(clock, LaneClock)
            seen.append(clock)
            async for event in super().stream(request, clock):
                yield event

    tiers = [synthetic("s", ttft_ms=1, tok_s=10_000), TierSpec(name="h", provider="openai", model="m")]
    Noting.clocks = []
    race = Race(tiers, TurnRequest("Why?", max_tokens=3), RealClock(),
                providers=[NotingSynthetic(tiers[0]), Noting(tiers[1])])
    await race.run()
    assert [c.coarse for c in seen] == [True]
    assert [c.coarse for c in Noting.clocks] == [False]


async def test_a_coarse_lane_on_the_real_clock_stamps_every_event_at_its_planned_time_in_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthetic lane at 20,000 tok/s on the real clock: each delta stamped at its planned moment, in order,
    though the lane woke far fewer times than it has events (each wake-up hands over every event due)."""
    from tokrace.providers.adapters.synthetic import Profile, schedule
    from tokrace.providers.timing.clock import RealClock

    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def counting_sleep(delay: float, result: object = None) -> object:
        waits.append(delay)  # a timer, or a pass of the loop (what a precise wake-up spins on)
        return await real_sleep(delay, result)

    monkeypatch.setattr(asyncio, "sleep", counting_sleep)
    tier = synthetic("fast", ttft_ms=5, tok_s=20_000, seed=3, jitter=0.2)
    race = Race([tier], TurnRequest("Why?", max_tokens=400), RealClock())
    lane, = await race.run()
    start = next(e.t for e in lane.events if isinstance(e, Request))
    deltas = [e for e in lane.events if isinstance(e, Delta)]
    planned = list(schedule(Profile.from_options(tier.options), 400))
    assert [d.t for d in deltas] == [start + step.t for step in planned]
    assert [d.text for d in deltas] == [step.text for step in planned]
    assert lane.ok
    assert len(waits) < len(deltas) / 4
