"""The race screen's first frame is written whole, by the first update the app writes: Textual draws the screen's
first layout inside the app's start-up batch and throws it away, and the screen then showed only a part one layout
later and the rest a frame after (issue 29's cold start)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from textual._compositor import LayoutUpdate
from tui_harness import demo_app

from tokrace.tui.app.launch import collector_paused
from tokrace.tui.app.screens.race import RaceScreen


async def test_the_first_update_written_is_the_whole_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = demo_app()
    shown: list[tuple[int, Any]] = []
    display = app._display

    def record(screen: Any, renderable: Any) -> None:
        if isinstance(screen, RaceScreen) and renderable is not None:
            shown.append((app._batch_count, renderable))
        display(screen, renderable)

    monkeypatch.setattr(app, "_display", record)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
    written = [update for batched, update in shown if not batched]
    assert [batched for batched, _ in shown if batched] == []  # nothing drawn only to be thrown away
    assert isinstance(written[0], LayoutUpdate)  # the whole screen, every row


async def test_a_screenshot_in_a_batch_is_still_the_whole_screen() -> None:
    app, _ = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        with app.batch_update():
            shot = app.export_screenshot()
    assert "ultrafast" in shot and "Bottlenecks" in shot


async def test_the_collector_comes_back_right_after_the_first_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = demo_app()
    happened: list[str] = []
    display, settle = app._display, app._settle

    def record(screen: Any, renderable: Any) -> None:
        if isinstance(screen, RaceScreen) and renderable is not None:
            happened.append(type(renderable).__name__)
        display(screen, renderable)

    def settled() -> None:
        happened.append(f"settle, collector {'on' if gc.isenabled() else 'off'}")
        settle()

    monkeypatch.setattr(app, "_display", record)
    monkeypatch.setattr(app, "_settle", settled)
    gc.disable()  # as launch starts the app
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert gc.isenabled()
    finally:
        gc.enable()
    assert happened[0] == "LayoutUpdate"  # the first frame, whole, then (not before) the collector
    assert "settle, collector off" in happened


def test_the_collector_is_on_again_when_the_app_fails_to_start() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("the terminal went away")
    assert gc.isenabled()


async def test_the_first_race_starts_once_the_first_frame_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = demo_app()
    happened: list[str] = []
    display, start = app._display, app.runner.start

    def record(screen: Any, renderable: Any) -> None:
        if isinstance(screen, RaceScreen) and renderable is not None:
            happened.append(type(renderable).__name__)
        display(screen, renderable)

    def started() -> None:
        happened.append("race")
        start()

    monkeypatch.setattr(app, "_display", record)
    monkeypatch.setattr(app.runner, "start", started)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
    assert happened[0] == "LayoutUpdate"
    assert happened.count("race") == 1


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
async def test_the_screen_is_styled_once_on_its_way_to_the_first_frame(size: tuple[int, int],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = demo_app()
    restyled: list[str] = []
    update_styles = app.update_styles

    def record(node: Any, animate: bool = True) -> None:
        restyled.append(type(node).__name__)
        update_styles(node, animate)

    monkeypatch.setattr(app, "update_styles", record)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        breakpoints = {"-narrow", "-wide", "-low", "-high"} & set(app.screen.classes)
    # not when it is first shown (Textual's own pass, redundant: styled as it was built), not the breakpoints (set
    # before the screen is mounted), the focused lane, nor each footer key (a tall lane is restyled once it knows it
    # has room for more)
    assert restyled.count("RaceScreen") == 0
    assert restyled.count("FooterKey") == 0
    assert restyled.count("LaneView") == (0 if size == (80, 24) else 3)
    assert len(breakpoints) == 2


async def test_each_stylesheet_is_parsed_once_on_the_way_to_the_first_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual's reparse (a theme set, a screen's stylesheet read) parsed every source into a stylesheet it then
    dropped, and the next widget class's CSS had them all parsed again: race.tcss twice, the app's defaults three
    times, 20 ms before the first frame. (A widget's CSS found nearer the top of a later widget's class tree ranks
    differently there, and is parsed again for it: Textual writes the rank into the rules.)"""
    import textual.css.stylesheet

    parsed: list[str] = []
    parse = textual.css.stylesheet.parse

    def counted(scope: str, css: str, read_from: tuple[str, str], **kwargs: Any) -> Any:
        parsed.append(f"{Path(read_from[0]).name} {read_from[1]} {kwargs['tie_breaker']}")
        return parse(scope, css, read_from, **kwargs)

    monkeypatch.setattr(textual.css.stylesheet, "parse", counted)
    app, _ = demo_app()
    settle = app._settle
    at_first_frame: list[str] = []

    def settled() -> None:
        at_first_frame.extend(parsed)
        settle()

    monkeypatch.setattr(app, "_settle", settled)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
    assert "race.tcss  0" in at_first_frame and "app.py App.DEFAULT_CSS -1" in at_first_frame
    assert sorted(at_first_frame) == sorted(set(at_first_frame))  # no source parsed twice


@pytest.mark.parametrize(("size", "present"), [((80, 24), False), ((160, 45), False), ((100, 30), True)])
async def test_restyling_the_screen_at_its_first_frame_would_change_nothing(size: tuple[int, int], present: bool,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """What makes leaving out Textual's restyle of a screen first shown safe: every widget's styles are already
    what that pass gives them."""
    app, _ = demo_app()
    app.present = present
    settle = app._settle
    before: dict[int, str] = {}
    after: dict[int, str] = {}

    def settled() -> None:
        nodes = list(app.screen.walk_children(with_self=True))
        before.update((id(node), f"{node!r} {node.styles.css}") for node in nodes)
        app.update_styles(app.screen, animate=False)
        after.update((id(node), f"{node!r} {node.styles.css}") for node in nodes)
        settle()

    monkeypatch.setattr(app, "_settle", settled)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
    assert len(before) > 40
    assert after == before


async def test_a_lanes_hidden_parts_wait_for_their_first_showing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first frame composes none of what a lane hides at the start (an error, a replay's pacing, the
    presenter's large figure): twelve of the screen's widgets. Each is mounted in its own place the first time it
    shows."""
    from tui_harness import at, failing_demo_tiers

    from tokrace.tui.app.widgets.lane import LaneView

    app, clock = demo_app(failing_demo_tiers())
    settle = app._settle
    at_first_frame: list[list[str]] = []

    def parts(view: LaneView) -> list[str]:
        return [" ".join(sorted(child.classes)) for child in view.children]

    def settled() -> None:
        at_first_frame.extend(parts(view) for view in app.screen.query(LaneView))
        settle()

    monkeypatch.setattr(app, "_settle", settled)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        assert at_first_frame[0] == ["lane-head", "tail", "final", "voice", "gauge", "lane-stats"]
        await at(pilot, clock, 10.0)
        await pilot.pause()
        failed, done = app.screen.views[1], app.screen.views[2]
        assert failed.error.display and done.final.display
        assert parts(failed)[-3:] == ["lane-error", "gauge", "lane-stats"]  # in their places
        assert parts(done) == ["lane-head", "tail", "final", "voice", "gauge", "lane-stats"]
