"""Snapshots of the finish line (the podium) and of the presenter's view, at 80×24, 100×30 and 160×45 (issues 11
and 26)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from tui_harness import at, factory, record_demo

from tokrace.providers.config.demo import DEMO_MAX_TOKENS, DEMO_PROMPT, demo_tiers
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.timing.clock import VirtualClock
from tokrace.tui.app.app import TokraceApp, build_app
from tokrace.tui.app.theming import AppThemes

WIDE = (160, 45)
SMALL = (80, 24)

Compare = Callable[..., bool]


def presenter_app(*, podium: bool, present: bool) -> tuple[TokraceApp, VirtualClock]:
    clock = VirtualClock()
    themes = AppThemes(requested="projector") if present else None
    app = build_app(demo_tiers(), TurnRequest(DEMO_PROMPT, DEMO_MAX_TOKENS), clock_factory=lambda: clock,
                    provider_factory=factory, animate=False, freeze_gc=False, podium=podium, present=present,
                    themes=themes)
    return app, clock


def moment(clock: Any, t: float) -> Callable[[Pilot[object]], Awaitable[None]]:
    async def run_before(pilot: Pilot[object]) -> None:
        await at(pilot, clock, t)
        await pilot.pause()

    return run_before


def test_podium_80x24(snap_compare: Compare) -> None:
    app, clock = presenter_app(podium=True, present=False)
    assert snap_compare(app, terminal_size=SMALL, run_before=moment(clock, 10.0))


def test_podium_wide(snap_compare: Compare) -> None:
    app, clock = presenter_app(podium=True, present=False)
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(clock, 10.0))


def test_present_mid_race_80x24(snap_compare: Compare) -> None:
    app, clock = presenter_app(podium=True, present=True)
    assert snap_compare(app, terminal_size=SMALL, run_before=moment(clock, 2.0))


def test_present_finished_wide(snap_compare: Compare) -> None:
    """The presenter's view once the race is over and the podium dismissed: each lane's final time."""
    app, clock = presenter_app(podium=True, present=True)

    async def run_before(pilot: Pilot[object]) -> None:
        await at(pilot, clock, 10.0)
        await pilot.pause()
        await pilot.press("x")

    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)


def test_present_podium_wide(snap_compare: Compare) -> None:
    app, clock = presenter_app(podium=True, present=True)
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(clock, 10.0))


def test_present_finished_80x24(snap_compare: Compare) -> None:
    app, clock = presenter_app(podium=False, present=True)
    assert snap_compare(app, terminal_size=SMALL, run_before=moment(clock, 10.0))


PROJECTOR = (100, 30)
"""The smallest terminal the presenter's view is designed for (issue 26)."""


def test_present_mid_race_projector_100x30(snap_compare: Compare) -> None:
    """Each lane's live tok/s in large type in its colour, its gauge in its colour, the footer whole."""
    app, clock = presenter_app(podium=False, present=True)
    assert snap_compare(app, terminal_size=PROJECTOR, run_before=moment(clock, 2.0))


def test_present_finished_projector_100x30(snap_compare: Compare) -> None:
    app, clock = presenter_app(podium=False, present=True)
    assert snap_compare(app, terminal_size=PROJECTOR, run_before=moment(clock, 10.0))


def test_present_podium_projector_100x30(snap_compare: Compare) -> None:
    """The finish line's speed-ups in five-row block type on the smallest projector, not thin three-row digits."""
    app, clock = presenter_app(podium=True, present=True)
    assert snap_compare(app, terminal_size=PROJECTOR, run_before=moment(clock, 10.0))


@pytest.mark.parametrize(("size", "big"), [((60, 20), False), ((80, 24), False), (PROJECTOR, True), (WIDE, True)])
async def test_the_finish_line_uses_large_type_wherever_it_fits(size: tuple[int, int], big: bool) -> None:
    from tokrace.tui.app.screens.podium import PodiumScreen
    from tokrace.tui.app.widgets.big_digits import BigDigits

    app, clock = presenter_app(podium=True, present=True)
    async with app.run_test(size=size) as pilot:
        await at(pilot, clock, 10.0)
        await pilot.pause()
        podium = app.screen
        assert isinstance(podium, PodiumScreen)
        assert podium.has_class("-big") is big
        assert all(d.display for d in podium.query(BigDigits)) is big
        box = podium.query_one("#podium").region
        assert box.height <= size[1] and box.bottom <= size[1]  # the whole finish line in view
        note = podium.query_one("#podium-note").region
        assert box.contains_region(note)


def test_present_mid_race_wide(snap_compare: Compare) -> None:
    app, clock = presenter_app(podium=False, present=True)
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(clock, 2.0))


async def test_the_presenter_shows_each_lanes_figure_large_and_its_gauge_in_its_colour() -> None:
    from tokrace.tui.app.screens.race import RaceScreen
    from tokrace.tui.app.widgets.big_digits import big

    app, clock = presenter_app(podium=False, present=True)
    async with app.run_test(size=PROJECTOR) as pilot:
        await at(pilot, clock, 10.0)
        screen = app.screen
        assert isinstance(screen, RaceScreen)
        for view in screen.views:
            assert view.big.display and view.big.value == f"{view.lane.e2e:.2f}"
            assert view.gauge.lane_coloured
            assert view.stats.region.width >= len(f"TTFT {view.lane.ttft:.2f} s · {view.lane.tokens} tok")
            assert "…" not in str(view.stats.render())
        assert screen.timeline.strong  # the axis and end marks in full contrast, never pale
        assert big("0.71")[0].startswith("█████")


def test_replay_sped_up_and_capped_wide(snap_compare: Compare, tmp_path: Path) -> None:
    """A replay at ×2 with idle pauses capped: the badge on every lane and in the replay bar."""
    import asyncio

    from tokrace.providers.adapters.replay import replay_tiers
    from tokrace.providers.recording import read_recording
    from tokrace.providers.runs.replay_control import ReplayControl, replay_duration

    path = asyncio.run(record_demo(tmp_path / "demo.jsonl"))
    recording = read_recording(path)
    base = VirtualClock()
    control = ReplayControl(path, replay_duration(recording), 2.0, base=lambda: base, recording=recording,
                            idle_cap=0.5)
    app = build_app(replay_tiers(recording), TurnRequest(recording.prompt), replay=control, animate=False,
                    freeze_gc=False)

    async def run_before(pilot: Pilot[object]) -> None:
        await pilot.app.runner.wait_started()  # type: ignore[attr-defined]
        await base.advance_to(0.4)
        pilot.app.screen.sample(force=True)  # type: ignore[attr-defined]
        await pilot.pause()

    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)
