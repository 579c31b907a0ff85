"""The race screen's first frame is written whole, by the first update the app writes: Textual draws the screen's
first layout inside the app's start-up batch and throws it away, and the screen then showed only a part one layout
later and the rest a frame after (issue 29's cold start)."""

from __future__ import annotations

from typing import Any

import pytest
from textual._compositor import LayoutUpdate
from tui_harness import demo_app

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
