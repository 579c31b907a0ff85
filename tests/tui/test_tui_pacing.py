"""The frame timer costs next to nothing when nothing changes: it draws only what moved, and slows to a couple of
frames a second once the race is over; the next race brings it back to full speed at once."""

from __future__ import annotations

import asyncio

from providers.base import TierSpec, TurnRequest
from tui.app import build_app
from tui.screens.race import FRAME_HZ, IDLE_AFTER, IDLE_HZ, RaceScreen


def quick_tier() -> TierSpec:
    return TierSpec(name="quick", provider="synthetic", model="m", options={"ttft_ms": 5, "tok_s": 4000})


async def test_the_frame_timer_idles_after_a_race_and_wakes_for_the_next() -> None:
    app = build_app([quick_tier()], TurnRequest("hi", max_tokens=40), freeze_gc=False)
    async with app.run_test(size=(100, 30)) as pilot:
        runner = app.runner
        await runner.wait_started()
        await runner.wait_finished()
        screen = app.screen
        assert isinstance(screen, RaceScreen)
        for _ in range(100):  # a second of frames with nothing new: the timer slows down
            if screen._hz == IDLE_HZ:
                break
            await asyncio.sleep(1 / FRAME_HZ)
        assert screen._hz == IDLE_HZ and screen._still >= IDLE_AFTER
        drawn = screen._frame
        await asyncio.sleep(0.6)
        assert screen._frame == drawn  # idle frames draw nothing
        await pilot.press("r")
        await runner.wait_started()
        await asyncio.sleep(0.05)
        assert screen._hz == FRAME_HZ and screen._frame > drawn
        await runner.wait_finished()
