"""The footer keeps whole keys, with "? Help" and "q Quit" always there; on a small terminal every lane stays in
view when a race ends (issue 11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets._footer import FooterKey
from tui_harness import at, demo_app

from tokrace.tui.app.widgets.footer import RaceFooter


def footer_keys(app: object) -> list[FooterKey]:
    footer = app.screen.query_one(RaceFooter)  # type: ignore[attr-defined]
    return [key for key in footer.query(FooterKey) if key.display]


@pytest.mark.parametrize("size", [(60, 20), (80, 24), (100, 30), (160, 45)])
async def test_the_footer_shows_only_whole_keys_and_always_help_and_quit(size: tuple[int, int]) -> None:
    app, clock = demo_app()
    async with app.run_test(size=size) as pilot:
        for t in (1.0, 10.0):
            await at(pilot, clock, t)
            await pilot.pause()
            keys = footer_keys(app)
            assert {"? Help", "q Quit"} <= {f"{k.key_display} {k.description}" for k in keys}
            for key in keys:  # nothing cut off at the right edge ("p" of "p Prompt" at 60 columns)
                assert key.region.right <= size[0], f"{key.key_display} {key.description} is cut"
                border = 1 if key.has_class("-command-palette") else 0  # ^p palette has a rule before it
                assert key.region.width == len(key.key_display) + 1 + len(key.description) + border


async def test_the_wide_footer_keeps_every_key() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(200, 45)) as pilot:
        await at(pilot, clock, 1.0)
        await pilot.pause()
        described = {k.description for k in footer_keys(app)}
        assert {"Race", "Stop", "Details", "Zoom", "Bottlenecks", "Voice", "Prompt", "Lane", "Help",
                "Quit"} <= described


async def test_stop_is_shown_disabled_once_the_race_has_ended_and_enabled_again_by_a_new_race() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(200, 45)) as pilot:
        def stop() -> FooterKey:
            return next(k for k in footer_keys(app) if k.description == "Stop")

        await at(pilot, clock, 1.0)
        await pilot.pause()
        assert app.runner.running and not stop().has_class("-disabled")
        await at(pilot, clock, 10.0)
        await pilot.pause()
        assert not app.runner.running and stop().has_class("-disabled")
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await at(pilot, clock, 0.5)  # the new race's own time
        assert app.runner.running and not stop().has_class("-disabled")


@pytest.mark.parametrize("size", [(60, 20), (80, 24)])
async def test_every_lane_stays_in_view_when_a_small_race_ends(size: tuple[int, int]) -> None:
    app, clock = demo_app()
    async with app.run_test(size=size) as pilot:
        await at(pilot, clock, 10.0)
        await pilot.pause()
        lanes = app.screen.query_one("#lanes")
        assert app.runner.live.finished
        for view in app.screen.views:
            assert view.region.height >= 3, view.lane.tier.name
            assert lanes.region.contains_region(view.region), view.lane.tier.name
            for part in (view.gauge, view.stats):  # the figures stay; the text gives way first
                assert part.region.height >= 1 and view.region.contains_region(part.region), view.lane.tier.name


@pytest.mark.parametrize("size", [(60, 20), (80, 24)])
async def test_every_lane_of_a_finished_loop_stays_in_view(size: tuple[int, int]) -> None:
    """A loop's lanes (a timeline with tool rows, a longer summary) also keep every lane in view at the end."""
    app, clock = demo_app(scenario="coding-loop")
    async with app.run_test(size=size) as pilot:
        await at(pilot, clock, 400.0)
        await pilot.pause()
        lanes = app.screen.query_one("#lanes")
        assert app.runner.live.finished
        for view in app.screen.views:
            assert view.region.height >= 3, view.lane.tier.name
            assert lanes.region.contains_region(view.region), view.lane.tier.name
            assert view.gauge.region.height >= 1 and view.region.contains_region(view.gauge.region)


async def test_every_lane_of_a_replayed_loop_stays_in_view_at_60x20(tmp_path: Path) -> None:
    """A replay adds its bar, its prompt and a longer summary: under 24 rows the prompt gives its row to the
    lanes, and each of the three keeps its gauge and figures in view once the loop is over."""
    import asyncio

    from exporting import record
    from tui_harness import replay_app

    path = await asyncio.to_thread(record, tmp_path / "loop.jsonl", scenario="coding-loop")
    app, base, _ = replay_app(path)
    async with app.run_test(size=(60, 20)) as pilot:
        await app.runner.wait_started()
        await base.advance_to(400.0)
        app.screen.sample(force=True)
        await pilot.pause()
        assert app.runner.live.finished
        assert app.screen.query_one("#replay-prompt").region.height == 0
        lanes = app.screen.query_one("#lanes")
        for view in app.screen.views:
            assert lanes.region.contains_region(view.region), view.lane.tier.name
            assert view.gauge.region.height >= 1 and view.region.contains_region(view.stats.region)




async def test_the_footer_composes_its_keys_once_on_the_way_to_the_first_frame(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual's footer composed no keys with the screen; it made them once the screen said its bindings changed,
    after the screen's first layout, and the first frame waited for them. They are made with the screen now, and
    not again while they stay the same (on its first size, on the screen's next word about its bindings)."""
    composed: list[int] = []
    compose = RaceFooter.compose

    def counted(footer: RaceFooter) -> Any:
        keys = list(compose(footer))
        composed.append(len(keys))
        return iter(keys)

    monkeypatch.setattr(RaceFooter, "compose", counted)
    app, _ = demo_app()
    settle = app._settle
    at_first_frame: list[list[str]] = []

    def settled() -> None:
        keys = footer_keys(app)
        at_first_frame.append([f"{k.description}{' (off)' if k.has_class('-disabled') else ''}" for k in keys])
        at_first_frame.append([str(n) for n in composed])
        settle()

    monkeypatch.setattr(app, "_settle", settled)
    async with app.run_test(size=(200, 45)) as pilot:
        await pilot.pause()
        assert len(at_first_frame[1]) == 1 and int(at_first_frame[1][0]) > 0  # composed once, with its keys
        assert "Help" in at_first_frame[0] and "Stop (off)" in at_first_frame[0]  # nothing to stop yet
        await app.runner.wait_started()
        await pilot.pause()
        await pilot.pause()
        assert len(composed) == 2  # the race runs: Stop is on, and the keys are made again
        assert [k.has_class("-disabled") for k in footer_keys(app) if k.description == "Stop"] == [False]


async def test_the_footer_makes_its_keys_again_for_a_new_width() -> None:
    app, _ = demo_app()
    async with app.run_test(size=(200, 45)) as pilot:
        await pilot.pause()
        assert "Zoom" in {k.description for k in footer_keys(app)}
        await pilot.resize_terminal(60, 20)
        await pilot.pause()
        await pilot.pause()
        described = {k.description for k in footer_keys(app)}
        assert {"Help", "Quit"} <= described and "Zoom" not in described
