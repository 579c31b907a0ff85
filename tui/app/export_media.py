"""The race screen exported: an SVG of one moment, or the whole race as an asciicast v3 file.

Both replay a recording on the screen headless, on virtual time, exactly as ``scripts/screenshots.py`` makes the
README's pictures: the SVG is Textual's own screenshot; the asciicast's frames are read from the compositor at
30 frames a second of race time (the screen's own frame rate, and its own sampling), each written as the terminal
output that turns the last frame into this one, with the race's original timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from tokrace.providers.adapters.replay import ReplayProvider, replay_tiers
from tokrace.providers.model.errors import TokraceError
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.recording import Recording
from tokrace.providers.timing.clock import VirtualClock

from ..cli.export_files import keep_spaces
from .render.capture import Capture

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from .app import TokraceApp
    from .theming import AppThemes

FPS: Final[int] = 30
"""Frames a second of a cast: the screen's own frame rate."""

DEFAULT_SIZE: Final[tuple[int, int]] = (160, 45)
"""The terminal an export draws on unless told (the README's screenshots' size)."""

MAX_FRAMES: Final[int] = 30 * 60 * 60
"""A cast longer than an hour of race time is refused (it would take long to make and be too big to play)."""

SETTLE_LIMIT: Final[int] = 100_000
"""How many clock steps to take at most, after the recording's end, for the race to end."""


def _app(recording: Recording, run: int | None, themes: AppThemes | None) -> tuple[TokraceApp, VirtualClock]:
    """The race screen replaying the recording on a virtual clock (as it looked live: prompt bar, no replay bar)."""
    from .app import build_app

    clock = VirtualClock()
    tiers = replay_tiers(recording, run=run)
    app = build_app(tiers, TurnRequest(recording.prompt), clock_factory=lambda: clock,
                    provider_factory=lambda tier: ReplayProvider(tier, recording), animate=False, freeze_gc=False,
                    themes=themes)
    return app, clock


async def _to_end(app: TokraceApp, clock: VirtualClock) -> None:
    """Move time on until the race is over (the lanes end at the recording's last events)."""
    for _ in range(SETTLE_LIMIT):
        if not app.runner.running:
            return
        deadline = clock.next_deadline
        if deadline is None:
            await asyncio.sleep(0.001)  # a tokenizer loading on a thread: real time, briefly
        else:
            await clock.advance_to(deadline)
    raise TokraceError("the replayed race did not end")


async def screen_svg(recording: Recording, *, run: int | None = None, at: float | None = None,
                     size: tuple[int, int] = DEFAULT_SIZE, themes: AppThemes | None = None) -> str:
    """The race screen at ``at`` seconds into the race, or at its end, as an SVG."""
    app, clock = _app(recording, run, themes)
    async with app.run_test(size=size) as pilot:
        await app.runner.wait_started()
        race = app.runner.race
        origin = race.origin if race is not None else 0.0
        if at is None:
            await _to_end(app, clock)
        else:
            await clock.advance_to(origin + at)
        await pilot.pause()
        await _draw(app, pilot, force=True)
        return keep_spaces(app.export_screenshot(title="tokrace"))


async def screen_cast(recording: Recording, *, run: int | None = None, size: tuple[int, int] = DEFAULT_SIZE,
                      themes: AppThemes | None = None, title: str = "tokrace",
                      progress: Callable[[float], None] | None = None) -> str:
    """The race replayed on the screen as an asciicast v3 file: a frame every 1/30 s of race time when anything
    changed, the last frame when the race ends, then the exit event. ``progress`` hears each frame's time."""
    app, clock = _app(recording, run, themes)
    cols, rows = size
    header = {"version": 3, "term": {"cols": cols, "rows": rows, "type": "xterm-256color"},
              "title": title, "env": {"TERM": "xterm-256color"}}
    created = recording.header.get("created")
    if isinstance(created, str):
        with contextlib.suppress(ValueError):
            header["timestamp"] = int(dt.datetime.fromisoformat(created).timestamp())
    lines = [json.dumps(header, ensure_ascii=False)]
    capture = Capture(app)
    async with app.run_test(size=size) as pilot:
        await app.runner.wait_started()
        race = app.runner.race
        origin = race.origin if race is not None else 0.0
        last_t = 0.0
        frame = 0
        while True:
            t = frame / FPS
            await clock.advance_to(origin + t)
            await pilot.pause(0)
            over = not app.runner.running
            await _draw(app, pilot, force=frame == 0 or over)
            change = "\x1b[?25l\x1b[2J" + capture.full() if frame == 0 else capture.take()
            if change:
                lines.append(json.dumps([round(t - last_t, 6), "o", change], ensure_ascii=False))
                last_t = t
            if progress is not None:
                progress(t)
            if over:
                break
            frame += 1
            if frame > MAX_FRAMES:
                raise TokraceError("the race is longer than an hour: too long for a cast")
        lines.append(json.dumps([round(t - last_t, 6), "x", "0"]))
    return "\n".join(lines) + "\n"


async def _draw(app: TokraceApp, pilot: Pilot[int], force: bool) -> None:
    """One frame of the screen, sampled as its own frame timer samples it (the race's end drawn in full)."""
    from .screens.race import RaceScreen

    screen = app.screen
    if isinstance(screen, RaceScreen):
        screen.sample(force=force)
    await pilot.pause(0)
