"""The playback clock a person steers during a replay: pause, resume, speed and step, on virtual base time."""

from __future__ import annotations

import asyncio

import pytest

from tokrace.providers.timing.clock import VirtualClock
from tokrace.providers.timing.playback import SPEEDS, PlaybackClock


async def sleeper(clock: PlaybackClock, t: float, woke: list[tuple[float, float]], base: VirtualClock) -> None:
    stamp = await clock.sleep_until(t)
    woke.append((stamp, base.now()))


async def test_playing_clock_follows_base_time_at_its_speed() -> None:
    base = VirtualClock()
    clock = PlaybackClock(base, speed=2.0)
    await base.advance(1.5)
    assert clock.now() == 3.0


async def test_sleepers_wake_in_order_at_base_time_scaled_by_speed() -> None:
    base = VirtualClock()
    clock = PlaybackClock(base, speed=4.0)
    woke: list[tuple[float, float]] = []
    tasks = [asyncio.create_task(sleeper(clock, t, woke, base)) for t in (2.0, 1.0)]
    await base.advance_to(10.0)
    await asyncio.gather(*tasks)
    assert woke == [(1.0, 0.25), (2.0, 0.5)]


async def test_paused_clock_stands_still_and_wakes_nobody() -> None:
    base = VirtualClock()
    clock = PlaybackClock(base)
    woke: list[tuple[float, float]] = []
    task = asyncio.create_task(sleeper(clock, 1.0, woke, base))
    await base.advance(0.5)
    clock.pause()
    await base.advance(5.0)
    assert clock.now() == 0.5 and woke == []
    clock.resume()
    await base.advance(0.5)
    await task
    assert woke == [(1.0, 6.0)]


async def test_speed_change_mid_sleep_reschedules_the_wake() -> None:
    base = VirtualClock()
    clock = PlaybackClock(base)
    woke: list[tuple[float, float]] = []
    task = asyncio.create_task(sleeper(clock, 3.0, woke, base))
    await base.advance(1.0)
    clock.set_speed(2.0)
    await base.advance_to(10.0)
    await task
    assert woke == [(3.0, 2.0)]


async def test_step_pauses_and_moves_a_tenth_or_to_the_next_wake() -> None:
    base = VirtualClock()
    clock = PlaybackClock(base)
    woke: list[tuple[float, float]] = []
    task = asyncio.create_task(sleeper(clock, 2.0, woke, base))
    await base.advance(0.0)
    assert clock.step() == 2.0  # nothing happens within 0.1 s: jump to the next event
    await task
    assert not clock.playing and woke == [(2.0, 0.0)]
    assert clock.step() == pytest.approx(2.1)


def test_faster_and_slower_walk_the_speed_ladder_and_stop_at_its_ends() -> None:
    clock = PlaybackClock(VirtualClock(), speed=1.0)
    assert clock.faster() == 2.0
    for _ in range(10):
        clock.faster()
    assert clock.speed == SPEEDS[-1]
    for _ in range(20):
        clock.slower()
    assert clock.speed == SPEEDS[0]


def test_a_speed_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="above 0"):
        PlaybackClock(VirtualClock(), speed=0)


async def test_toggle_pauses_then_resumes() -> None:
    base = VirtualClock()
    clock = PlaybackClock(base)
    clock.toggle()
    await base.advance(1.0)
    assert clock.now() == 0.0 and not clock.playing
    clock.toggle()
    await base.advance(1.0)
    assert clock.now() == 1.0
