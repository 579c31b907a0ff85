"""The frame timer costs next to nothing when nothing changes: it draws only what moved, and slows to a couple of
frames a second once the race is over; the next race brings it back to full speed at once."""

from __future__ import annotations

import asyncio
import math

import pytest
from textual.geometry import Region
from textual.pilot import Pilot

from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.runs import runner as runner_module
from tokrace.providers.timing.clock import COARSE_WAKE_S, VirtualClock
from tokrace.tui.app.app import TokraceApp, build_app
from tokrace.tui.app.screens import race as race_screen
from tokrace.tui.app.screens.race import FRAME_HZ, IDLE_AFTER, IDLE_HZ, RaceScreen
from tokrace.tui.app.widgets import lane as lane_widgets


def quick_tier() -> TierSpec:
    return TierSpec(name="quick", provider="synthetic", model="m", options={"ttft_ms": 5, "tok_s": 4000})


class FrameClock:
    """The frame timer's real clock, on the test's virtual time instead: it wakes on the same grid (every
    ``cells``-th point of COARSE_WAKE_S), when the test moves time there."""

    def __init__(self, base: VirtualClock) -> None:
        self.base = base

    def now(self) -> float:
        return self.base.now()

    async def sleep_until_coarse(self, t: float, cells: int = 1) -> float:
        step = COARSE_WAKE_S * cells
        return await self.base.sleep_until(math.ceil(t / step) * step)


def animated_app(monkeypatch: pytest.MonkeyPatch, max_tokens: int) -> tuple[TokraceApp, VirtualClock]:
    """The screen as a person watches it (frame timer on), the race and the frames on one virtual clock."""
    clock = VirtualClock()
    monkeypatch.setattr(race_screen, "RealClock", lambda: FrameClock(clock))

    async def quiet_at_once(max_wait_s: float = 1.0) -> None:  # the first race waits for nothing real
        return None

    monkeypatch.setattr(runner_module, "quiet_loop", quiet_at_once)
    app = build_app([quick_tier()], TurnRequest("hi", max_tokens=max_tokens), clock_factory=lambda: clock,
                    freeze_gc=False)
    assert app.animated
    return app, clock


async def until_idle(pilot: Pilot[object], clock: VirtualClock, screen: RaceScreen) -> None:
    """Frame after frame (moving time one frame on each time), until the timer has slowed to IDLE_HZ."""
    for _ in range(100):  # IDLE_AFTER frames with nothing new (a second of them): the timer slows down
        if screen._hz == IDLE_HZ:
            break
        await clock.advance(1 / FRAME_HZ)
        await pilot.pause()
    assert screen._hz == IDLE_HZ and screen._still >= IDLE_AFTER


async def test_the_frame_timer_idles_after_a_race_and_wakes_for_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    app, clock = animated_app(monkeypatch, max_tokens=40)
    async with app.run_test(size=(100, 30)) as pilot:
        runner = app.runner
        await runner.wait_started()
        await clock.advance(0.1)  # 40 tokens at 4000 tok/s after 5 ms: the race is over
        await runner.wait_finished()
        screen = app.screen
        assert isinstance(screen, RaceScreen)
        assert screen._hz == FRAME_HZ  # at full speed while the race ran
        await until_idle(pilot, clock, screen)
        drawn = screen._frame
        await clock.advance(3.0)  # six idle frames
        await pilot.pause()
        assert screen._frame == drawn  # idle frames draw nothing
        assert screen._hz == IDLE_HZ
        await pilot.press("r")
        await app.workers.wait_for_complete()  # the restart: the race started, and its first frame drawn
        await runner.wait_started()
        assert screen._hz == FRAME_HZ and screen._frame > drawn
        await clock.advance(0.1)
        await runner.wait_finished()


async def test_the_last_frames_of_a_race_show_the_end_of_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lane_widgets, "MARKDOWN_MAX_CHARS", 0)  # the streaming tail stays in view after the race
    app, clock = animated_app(monkeypatch, max_tokens=300)
    async with app.run_test(size=(60, 20)) as pilot:
        runner = app.runner
        await runner.wait_started()
        await clock.advance(0.2)  # 300 tokens at 4000 tok/s after 5 ms: the race is over
        await runner.wait_finished()
        screen = app.screen
        assert isinstance(screen, RaceScreen)
        await until_idle(pilot, clock, screen)  # the frames have idled: whatever changed last has been drawn
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
    from tokrace.providers.timing.clock import RealClock

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
