"""How the screen looks, pinned as SVG snapshots of the demo on virtual time (update with --snapshot-update)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from tui_harness import at, demo_app, failing_demo_tiers, record_demo, replay_app

WIDE = (160, 45)
SMALL = (80, 24)

Compare = Callable[..., bool]


def moment(clock: Any, t: float, *keys: str) -> Callable[[Pilot[object]], Awaitable[None]]:
    """Before the snapshot: move the race to ``t`` seconds, draw the frame, then press ``keys``."""
    async def run_before(pilot: Pilot[object]) -> None:
        await at(pilot, clock, t)
        await pilot.press(*keys)

    return run_before


def test_demo_mid_race_wide(snap_compare: Compare) -> None:
    app, clock = demo_app()
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(clock, 2.0))


def test_demo_mid_race_80x24(snap_compare: Compare) -> None:
    app, clock = demo_app()
    assert snap_compare(app, terminal_size=SMALL, run_before=moment(clock, 2.0))


def test_demo_finished_wide(snap_compare: Compare) -> None:
    app, clock = demo_app()
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(clock, 10.0))


def test_demo_finished_80x24(snap_compare: Compare) -> None:
    app, clock = demo_app()
    assert snap_compare(app, terminal_size=SMALL, run_before=moment(clock, 10.0))


def test_lane_in_error_wide(snap_compare: Compare) -> None:
    app, clock = demo_app(failing_demo_tiers())
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(clock, 3.0))


def test_help_screen_80x24(snap_compare: Compare) -> None:
    app, clock = demo_app()
    assert snap_compare(app, terminal_size=SMALL, run_before=moment(clock, 1.0, "question_mark"))


def test_details_of_the_fastest_lane_wide(snap_compare: Compare) -> None:
    app, clock = demo_app()
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(clock, 10.0, "3", "d"))


def test_replay_paused_wide(snap_compare: Compare, tmp_path: Path) -> None:
    import asyncio

    app, base, _control = replay_app(asyncio.run(record_demo(tmp_path / "demo.jsonl")))

    async def run_before(pilot: Pilot[object]) -> None:
        await pilot.app.runner.wait_started()  # type: ignore[attr-defined]
        await base.advance_to(1.5)
        await pilot.press("space")

    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)
