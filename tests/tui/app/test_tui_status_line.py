"""The race's status line: drawn every frame as one strip of its styled runs, without Textual's visual, looking
exactly as the same text through ``update`` (issue 29)."""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.filter import DimFilter, LineFilter, Monochrome
from textual.geometry import Region
from textual.widget import Widget

from tokrace.tui.app.render import content_size
from tokrace.tui.app.widgets.summary import with_pace

LINES = [
    Text("racing · 0.40 s", style="bold"),
    Text.assemble(("racing · 0.40 s", "bold"), " · most tokens: Sol ultrafast (1,234)"),
    with_pace(Text.assemble(("replaying · 0.40 s", "bold"), " · level on tokens: A and B (40 each)"), "4×",
              first=True),
    Text("racing · " + "a very long name " * 20, style="bold"),  # wider than the line: Textual wraps it as before
    Text("racing\nsecond row"),
]


def drawn(widget: object) -> list[tuple[str, object]]:
    """Each cell of the widget's first row (padding included) and its style: what the terminal shows."""
    size = content_size(widget)  # type: ignore[arg-type]
    strips = widget.render_lines(Region(0, 0, size.width + 2, 1))  # type: ignore[attr-defined]
    return [(char, segment.style) for strip in strips for segment in strip for char in segment.text]


@pytest.mark.parametrize("line", LINES, ids=["bold", "spans", "pace badge", "too wide", "two rows"])
async def test_the_status_line_looks_as_the_same_text_updated(line: Text) -> None:
    from tui_harness import demo_app

    app, _clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        summary = app.screen.summary  # type: ignore[attr-defined]
        summary.update(line, layout=False)
        await pilot.pause()
        expected = drawn(summary)
        summary.update("", layout=False)
        await pilot.pause()
        summary.show_line(line)
        await pilot.pause()
        assert drawn(summary) == expected
        assert summary.content.plain == line.plain


async def test_racing_frames_skip_textual_visuals_and_unchanged_text() -> None:
    from tui_harness import at, demo_app

    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 0.3)
        summary = app.screen.summary  # type: ignore[attr-defined]
        updates: list[object] = []
        summary.update = lambda *args, **kwargs: updates.append(args)  # type: ignore[method-assign]
        for t in (0.35, 0.4, 0.45):
            await clock.advance_to(app.runner.race.origin + t)  # type: ignore[union-attr]
            app.screen.sample()  # type: ignore[attr-defined]
            await pilot.pause()
            tokens = max(lane.tokens for lane in app.runner.live.lanes)
            shown = "".join(segment.text for segment in summary.render_line(0))
            assert f"({tokens:,})" in shown
        assert updates == []  # each frame drew its line directly, never through ``update``
        refreshes: list[object] = []
        summary.refresh = lambda *args, **kwargs: refreshes.append(args)  # type: ignore[method-assign]
        summary.show_line(summary.content.copy())
        assert refreshes == []  # the same text again: nothing to draw


@pytest.mark.parametrize("extra", [(), (Monochrome(),), (DimFilter(),)])
async def test_the_padded_line_is_the_line_textual_would_draw(extra: tuple[LineFilter, ...]) -> None:
    """Between its padding, under the app's filters, whole or cropped."""
    from tui_harness import demo_app

    app, _clock = demo_app()
    app._filters += extra
    async with app.run_test(size=(160, 45)) as pilot:
        summary = app.screen.summary  # type: ignore[attr-defined]
        summary.show_line(LINES[2])
        await pilot.pause()
        width = content_size(summary).width + 2
        for crop in (Region(0, 0, width, 1), Region(0, 0, 30, 1), Region(5, 0, 20, 1)):
            direct = summary.render_lines(crop)
            summary._styles_cache.clear()
            through_textual = Widget.render_lines(summary, crop)  # Textual's own padding and filters
            assert [(c, s.style) for strip in direct for s in strip for c in s.text] == \
                [(c, s.style) for strip in through_textual for s in strip for c in s.text]
