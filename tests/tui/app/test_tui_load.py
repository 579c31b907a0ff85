"""The load screen: one lane per tier (never one per stream) with its aggregate gauge and TTFT distribution, and at
the end bench's own figures."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from textual.pilot import Pilot
from tui_harness import load_app, load_at, text_of

from tokrace.providers.runs.load import LoadPlan
from tokrace.tui.app.widgets.load_lane import LoadLane, histogram

Compare = Callable[..., bool]


async def test_a_tier_under_load_is_one_lane_with_its_rate_and_ttft() -> None:
    app, clock = load_app(LoadPlan((16,), requests=48))
    async with app.run_test(size=(120, 40)) as pilot:  # type: ignore[attr-defined]
        await load_at(pilot, clock, 2.0)
        lanes = list(app.screen.query(LoadLane))  # type: ignore[attr-defined]
        assert len(lanes) == 3  # the demo's three tiers, 16 streams each: three lanes
        fast = text_of(lanes[2])
        assert "Sol ultrafast" in fast and "16 streams" in fast and "≈" in fast and "tok/s" in fast
        assert "TTFT  p50 0.183 s" in fast and "under way" in fast


async def test_when_the_load_ends_the_lanes_show_benchs_figures() -> None:
    app, clock = load_app(LoadPlan((2,), requests=4), max_tokens=40)
    async with app.run_test(size=(120, 40)) as pilot:  # type: ignore[attr-defined]
        await load_at(pilot, clock, 30.0)
        runner = app.runner  # type: ignore[attr-defined]
        await runner.wait_finished()
        await load_at(pilot, clock, 30.0)
        point = runner.result.points[2]
        fast = text_of(app.screen.query_one("#load-lane-2", LoadLane))  # type: ignore[attr-defined]
        assert f"{point.delivered_tok_s:.1f} tok/s" in fast and "≈" not in fast and "4 requests · done" in fast
        results = text_of(app.screen.query_one("#load-results"))  # type: ignore[attr-defined]
        assert "as tokrace bench --concurrency prints it" in results
        assert f"{point.delivered_tok_s:.1f}" in results  # the very cell bench prints


def test_the_histogram_counts_each_value_once() -> None:
    strip, lo, hi = histogram([0.1, 0.1, 0.2, 0.3], 3)
    assert (lo, hi) == (0.1, 0.3) and strip == "█▄▄"
    assert histogram([0.5, 0.5], 4)[0] == "  █ "  # all alike: one full bin in the middle


def moment(clock: Any, t: float) -> Callable[[Pilot[object]], Awaitable[None]]:
    async def run_before(pilot: Pilot[object]) -> None:
        await load_at(pilot, clock, t)

    return run_before


def test_load_screen_wide(snap_compare: Compare) -> None:
    app, clock = load_app(LoadPlan((16,), requests=64))
    assert snap_compare(app, terminal_size=(160, 45), run_before=moment(clock, 2.5))


def test_load_screen_80x24(snap_compare: Compare) -> None:
    app, clock = load_app(LoadPlan((16,), requests=64))
    assert snap_compare(app, terminal_size=(80, 24), run_before=moment(clock, 2.5))


def test_load_screen_finished_wide(snap_compare: Compare) -> None:
    app, clock = load_app(LoadPlan((1, 4), requests=8), max_tokens=60)

    async def run_before(pilot: Pilot[object]) -> None:
        await load_at(pilot, clock, 60.0)
        await app.runner.wait_finished()  # type: ignore[attr-defined]
        await load_at(pilot, clock, 60.0)

    assert snap_compare(app, terminal_size=(160, 45), run_before=run_before)


def test_a_spread_of_ttfts_is_drawn_as_a_strip_between_its_ends() -> None:
    from tokrace.providers.model.tiers import TierSpec
    from tokrace.providers.runs.live_load import LiveTierLoad
    from tokrace.providers.runs.load import RequestRow
    from tokrace.tui.app.widgets.load_lane import lane_text
    from tokrace.tui.app.widgets.palette import APP_COLOURS, Palette

    lane = LiveTierLoad(TierSpec(name="t", provider="openai", model="m"))
    lane.level(4)
    for i, ttft in enumerate((0.100, 0.110, 0.120, 0.300)):
        lane.started_request(i, 0.0)
        lane.ended_request(RequestRow(i, 0.0, 1.0, True, None, 0.0, ttft, 100.0, 1.0, 100, "usage"))
    text = lane_text(lane, 0, 1.0, 1000.0, 80, Palette(APP_COLOURS)).plain
    assert "4 requests · 0 under way" in text and "≈400 tok/s" in text
    strip = text.splitlines()[-1]
    assert strip.startswith("   0.100 s ") and strip.endswith(" 0.300 s")
    body = strip[len("   0.100 s "):-len(" 0.300 s")]
    assert body.count("█") == 4 and body.endswith("█") and body.index("█", 4) < 8  # three early, one at the end
