"""Help scrolls, by keys and by the mouse wheel, so every section is reachable at 80×24 (issue 11)."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.events import MouseScrollDown
from tui_harness import at, demo_app

from tokrace.tui.app.screens.help import HelpScreen


def body(app: object) -> VerticalScroll:
    screen = app.screen  # type: ignore[attr-defined]
    assert isinstance(screen, HelpScreen)
    return screen.query_one("#help-body", VerticalScroll)


def shown(scroll: VerticalScroll, name: str) -> bool:
    """Whether the section ``name`` (a widget in the help) is inside the visible part of the scroll."""
    widget = scroll.query_one(name)
    top = widget.virtual_region.y
    return scroll.scroll_y <= top < scroll.scroll_y + scroll.scrollable_content_region.height


async def test_help_at_80x24_scrolls_to_the_legend_and_the_voice_and_bottleneck_notes_by_keys() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await at(pilot, clock, 1.0)
        await pilot.press("question_mark")
        scroll = body(app)
        assert scroll.max_scroll_y > 0 and scroll.scroll_y == 0
        assert not shown(scroll, "#legend")
        await pilot.press("pagedown")
        await pilot.pause()
        assert scroll.scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y
        await pilot.press("home", "down", "down")
        await pilot.pause()
        assert scroll.scroll_y == 2
        await pilot.press("space")
        await pilot.pause()
        assert scroll.scroll_y > 2


async def test_help_scrolls_with_the_mouse_wheel() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await at(pilot, clock, 1.0)
        await pilot.press("question_mark")
        scroll = body(app)
        for _ in range(30):
            scroll.post_message(MouseScrollDown(scroll, 10, 5, 0, 0, 0, False, False, False))
        await pilot.pause()
        await pilot.pause()
        assert scroll.scroll_y > 0
