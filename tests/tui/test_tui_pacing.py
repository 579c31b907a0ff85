"""The frame timer costs next to nothing when nothing changes: it draws only what moved, and slows to a couple of
frames a second once the race is over; the next race brings it back to full speed at once."""

from __future__ import annotations

import asyncio

import pytest
from textual.geometry import Region

from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.tui.app.app import build_app
from tokrace.tui.app.screens.race import FRAME_HZ, IDLE_AFTER, IDLE_HZ, RaceScreen
from tokrace.tui.app.widgets import lane as lane_widgets


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


async def test_the_last_frames_of_a_race_show_the_end_of_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lane_widgets, "MARKDOWN_MAX_CHARS", 0)  # the streaming tail stays in view after the race
    app = build_app([quick_tier()], TurnRequest("hi", max_tokens=300), freeze_gc=False)
    async with app.run_test(size=(60, 20)):
        runner = app.runner
        await runner.wait_started()
        await runner.wait_finished()
        screen = app.screen
        assert isinstance(screen, RaceScreen)
        for _ in range(100):  # until the frames have idled: whatever changed last has been drawn
            if screen._hz == IDLE_HZ:
                break
            await asyncio.sleep(1 / FRAME_HZ)
        tail = screen.views[0].tail
        assert tail.display
        shown = ["".join(s.text for s in strip).strip() for strip in tail.render_lines(Region(0, 0, *tail.size))]
        shown = [line for line in shown if line]
        text = "".join(text for _, text in runner.live.lanes[0].tail(4000)).rstrip()
        assert shown and text.endswith(shown[-1])
        assert len(text.split()) > len(shown)  # more text than fits: the tail shows its end, not its start


async def test_frames_wake_on_every_other_point_of_the_lanes_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """The frame timer waits on the real clock's coarse grid (every other point: where the offline lanes, the
    recorder and the HTTP lanes' looks wake too), a frame's time ahead less a cell, and draws a frame each time."""
    from tokrace.providers.timing.clock import COARSE_WAKE_S, RealClock

    asked: list[tuple[float, int]] = []
    drawn: list[int] = []

    async def noted(clock: RealClock, t: float, cells: int = 1) -> float:
        asked.append((t - clock.now(), cells))
        if len(asked) > 3:
            raise asyncio.CancelledError
        return clock.now()

    monkeypatch.setattr(RealClock, "sleep_until_coarse", noted)
    screen = RaceScreen.__new__(RaceScreen)
    monkeypatch.setattr(RaceScreen, "sample", lambda self, force=False: drawn.append(len(asked)))
    with pytest.raises(asyncio.CancelledError):
        await screen._frames(FRAME_HZ)
    assert [cells for _, cells in asked] == [2] * 4 and drawn == [1, 2, 3]
    assert all(ahead == pytest.approx(1 / FRAME_HZ - COARSE_WAKE_S, abs=1e-3) for ahead, _ in asked)
