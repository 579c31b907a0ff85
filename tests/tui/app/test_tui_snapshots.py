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


def test_voice_mode_mid_run_wide(snap_compare: Compare) -> None:
    """Standard and ultrafast Sol with a 2.5 tok/s tier, 36 s in: the voice trails the text on the fast tiers and
    has caught up with it (fallen silent, its stalls on the timeline) on the slow one."""
    from tokrace.providers.config.demo import demo_tiers
    from tokrace.providers.model.tiers import TierSpec

    slow = TierSpec(name="Slow local", provider="synthetic", model="local-3b",
                    options={"ttft_ms": 300, "tok_s": 2.5, "seed": 4})
    app, clock = demo_app([*demo_tiers()[::2], slow])
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(clock, 36.0, "v"))


def test_bottleneck_view_of_the_coding_loop_wide(snap_compare: Compare) -> None:
    """The coding loop over: each lane's loop split into model, tools and people, the Amdahl bound, the what-if at
    N = 14, ultrafast's 14× token speed-up next to its end-to-end one; the timeline of the whole loop below."""
    app, clock = demo_app(scenario="coding-loop")
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(clock, 200.0, "b"))


def test_bottleneck_view_of_the_coding_loop_80x24(snap_compare: Compare) -> None:
    app, clock = demo_app(scenario="coding-loop")
    assert snap_compare(app, terminal_size=SMALL, run_before=moment(clock, 200.0, "b"))


def test_timeline_with_parallel_tool_calls_wide(snap_compare: Compare) -> None:
    """The incident 12 s in: each lane's two pairs of queries ran side by side, the second of each pair drawn on
    the row under its lane; ultrafast already waits for the on-call's approval."""
    app, clock = demo_app(scenario="incident")
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(clock, 12.0))
