"""The prompt line ends in an ellipsis where it is cut, live and in a replay (issue 11)."""

from __future__ import annotations

from pathlib import Path

from textual.widget import Widget
from tui_harness import at, demo_app, record_demo, replay_app


def shown(widget: Widget) -> str:
    return widget.render_line(0).text.rstrip()


async def test_a_long_prompt_ends_in_an_ellipsis_until_it_is_edited() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await at(pilot, clock, 0.5)
        prompt = app.screen.query_one("#prompt")
        line = shown(prompt)
        assert line.endswith("…") and len(line) <= 80
        assert app.runner.request.prompt.startswith(line[:-1].strip())
        await pilot.press("p")
        assert not shown(prompt).endswith("…")  # editing shows the text itself, with the cursor


async def test_a_short_prompt_has_no_ellipsis() -> None:
    app, clock = demo_app(prompt="Why?")
    async with app.run_test(size=(80, 24)) as pilot:
        await at(pilot, clock, 0.5)
        assert shown(app.screen.query_one("#prompt")) == "Why?"


async def test_a_replays_prompt_ends_in_an_ellipsis_where_it_is_cut(tmp_path: Path) -> None:
    app, _base, _control = replay_app(await record_demo(tmp_path / "demo.jsonl"))
    async with app.run_test(size=(12, 24)) as pilot:
        await pilot.pause()
        line = app.screen.query_one("#replay-prompt").render_line(0).text.rstrip()
        assert line.endswith("…")
