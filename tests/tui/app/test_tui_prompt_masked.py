"""Masking on the screen matches masking in files: a key-shaped string in the prompt shows as ``[redacted]`` on the
prompt bar (as in the recording and the exports) until the bar is edited."""

from __future__ import annotations

from textual.widget import Widget
from tui_harness import at, demo_app

KEY = "sk-proj-ABCDEF0123456789abcdef0123"


def shown(widget: Widget) -> str:
    return widget.render_line(0).text.rstrip()


async def test_a_key_in_the_prompt_is_masked_on_the_prompt_bar_as_in_the_recording() -> None:
    app, clock = demo_app(prompt=f"use {KEY} now")
    async with app.run_test(size=(80, 24)) as pilot:
        await at(pilot, clock, 0.5)
        prompt = app.screen.query_one("#prompt")
        assert shown(prompt) == "use [redacted] now"
        assert app.runner.request.prompt == f"use {KEY} now"  # what is sent is what was typed
        await pilot.press("p")
        assert KEY in shown(prompt)  # editing shows the text itself
