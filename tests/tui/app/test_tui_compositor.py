"""The race screen's compositor draws only what a partial update writes out: a terminal that had the whole screen
and then got every partial update shows, cell for cell, what drawing the whole screen afresh shows, frame after
frame (the text scrolling, the timeline growing, gauges and figures, states, a lane failing, the race ending);
and the whole screen is drawn as Textual's own compositor draws it; and each update becomes the same escape
sequences as Textual's own update would."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.control import ControlType
from rich.segment import Segment
from rich.style import Style
from textual._compositor import ChopsUpdate, Compositor
from textual.pilot import Pilot
from textual.strip import Strip
from tui_harness import demo_app, failing_demo_tiers

from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.model.tiers import TierSpec
from tokrace.tui.app.app import TokraceApp
from tokrace.tui.app.render.compositor import LineChopsUpdate, LineCompositor, runs
from tokrace.tui.app.screens.race import RaceScreen

Cell = tuple[str, Style | None]


def cells(strips: list[Strip]) -> list[list[Cell]]:
    """Every cell of every line: its character and style (a wide character's second cell is "")."""
    out = []
    for strip in strips:
        line: list[Cell] = []
        for text, style, _ in strip:
            for ch in text:
                line.append((ch, style))
                line.extend([("", style)] * (Segment(ch).cell_length - 1))
        out.append(line)
    return out


def apply(screen: list[list[Cell]], update: ChopsUpdate) -> int:
    """Write a partial update to ``screen`` as a terminal would; the number of cells written."""
    console = Console(width=len(screen[0]), color_system="truecolor")
    x = y = written = 0
    for segment in update.__rich_console__(console, console.options):
        if segment.control:
            for code in segment.control:
                if code[0] == ControlType.CURSOR_MOVE_TO:
                    x, y = code[1], code[2]  # type: ignore[misc]
            continue
        if segment.text == "\n":
            continue
        for ch in segment.text:
            width = Segment(ch).cell_length
            screen[y][x] = (ch, segment.style)
            for extra in range(1, width):
                screen[y][x + extra] = ("", segment.style)
            x += width
            written += width
    return written


def race_compositor(app: TokraceApp) -> tuple[RaceScreen, LineCompositor, list[ChopsUpdate]]:
    """The race screen, its compositor, and the partial updates the compositor makes from now on, as it makes
    them."""
    screen = app.screen
    assert isinstance(screen, RaceScreen)
    compositor = screen._compositor
    assert isinstance(compositor, LineCompositor)
    updates: list[ChopsUpdate] = []
    partial = compositor.render_partial_update

    def spy() -> ChopsUpdate | None:
        update = partial()
        if update is not None:
            updates.append(update)
        return update

    compositor.render_partial_update = spy  # type: ignore[method-assign]
    return screen, compositor, updates


async def first_frame(app: TokraceApp, screen: RaceScreen, pilot: Pilot[None]) -> float:
    """Once the race started, its first frame drawn whole (whatever the update timer had not drawn yet too): the
    race's origin on its clock."""
    await app.runner.wait_started()
    origin = app.runner.race.origin if app.runner.race else 0.0
    screen.sample(force=True)
    await pilot.pause()
    screen._on_timer_update()
    return origin


def test_runs_of_lines() -> None:
    assert runs([]) == []
    assert runs([3]) == [(3, 4)]
    assert runs([0, 1, 2, 5, 6, 9]) == [(0, 3), (5, 7), (9, 10)]


def test_escape_sequences_are_textuals_for_parts_cut_skipped_and_whole() -> None:
    """Parts of lines inside a span, reaching past either end of one (cut), outside every span, missing (None),
    several spans on a line, and a line that ends the update: the same text as Textual's own update."""
    red, bold = Style(color="red"), Style(bold=True, bgcolor="blue")
    line = {0: Strip([Segment("abcde", red)]), 5: Strip([Segment("fgh", bold), Segment("ij")]),
            10: None, 14: Strip([Segment("xyz", red)])}
    chops = [dict(line), dict(line), {0: Strip([Segment("é😀wide", bold)])}]
    ends = [[5, 10, 14, 17], [5, 10, 14, 17], [7]]
    console = Console(width=20, color_system="truecolor", force_terminal=True)
    for spans in ([(0, 0, 17), (1, 2, 8), (2, 0, 7)], [(0, 6, 12), (0, 14, 16), (1, 0, 3)],
                  [(1, 3, 5), (2, 1, 4)], [(0, 17, 20)]):
        ours = LineChopsUpdate(chops, spans, ends).render_segments(console)
        assert ours == ChopsUpdate(chops, spans, ends).render_segments(console), spans
    assert "\x1b[2;6H" in LineChopsUpdate(chops, [(1, 2, 8)], ends).render_segments(console)


@pytest.mark.parametrize(("size", "tiers"), [
    ((160, 45), [TierSpec(name="fast", provider="synthetic", model="m",
                          options={"ttft_ms": 50, "tok_s": 3000, "seed": 4})]),
    ((80, 24), demo_tiers()),
    ((160, 45), failing_demo_tiers()),
])
async def test_partial_updates_write_what_a_whole_new_screen_shows(size: tuple[int, int],
                                                                   tiers: list[TierSpec]) -> None:
    app, clock = demo_app(tiers)
    async with app.run_test(size=size) as pilot:
        screen, compositor, updates = race_compositor(app)
        origin = await first_frame(app, screen, pilot)
        terminal = cells(compositor.render_strips())
        updates.clear()
        written = 0
        sequences = 0
        console = Console(width=size[0], color_system="truecolor", force_terminal=True)
        t = 0.0
        for frame in range(90):
            t += 1 / 15 if frame % 10 else 0.5
            await clock.advance_to(origin + t)
            screen.sample()
            await pilot.pause()
            screen._on_timer_update()  # whatever Textual's update timer has not drawn yet
            for update in updates:
                written += apply(terminal, update)
                # the escape sequences a terminal gets: Textual's own, character for character
                text = update.render_segments(console)
                assert text == ChopsUpdate.render_segments(update, console), frame
                sequences += len(text)
            updates.clear()
            whole = compositor.render_strips()
            assert terminal == cells(whole), frame
            # The whole screen as Textual draws it (every widget asked for every line)
            textual = [Strip.join(line.values()) for line in
                       Compositor._render_chops(compositor, compositor.size.region, lambda y: True)]
            assert cells(textual[: size[1]]) == cells(whole), frame
        assert written > 0 and sequences > 0
        assert app.runner.live.finished or t > 5


async def test_partial_updates_stay_true_across_a_resize_a_theme_and_a_new_race() -> None:
    """What the compositor keeps from one frame to the next (the widgets on screen and their visible parts) is
    worked out again when the layout changes: after a resize, another theme and a new race, every partial update
    still writes what a whole new screen shows."""
    app, clock = demo_app(demo_tiers())
    async with app.run_test(size=(160, 45)) as pilot:
        screen, compositor, updates = race_compositor(app)
        await app.runner.wait_started()

        async def redrawn() -> list[list[Cell]]:
            """The screen as a terminal has it after a change (Textual draws all of it)."""
            screen.sample(force=True)
            await pilot.pause()
            screen._on_timer_update()
            updates.clear()
            return cells(compositor.render_strips())

        terminal = await redrawn()
        written = 0
        for frame in range(80):
            if frame == 20:
                await pilot.resize_terminal(100, 30)
                terminal = await redrawn()
            elif frame == 40:
                app.theme = next(name for name in app.available_themes if name != app.theme)
                terminal = await redrawn()
            elif frame == 60:
                await app.runner.restart(None)
                terminal = await redrawn()
            await clock.advance(1 / 15 if frame % 10 else 0.5)
            screen.sample()
            await pilot.pause()
            screen._on_timer_update()
            for update in updates:
                written += apply(terminal, update)
            updates.clear()
            assert terminal == cells(compositor.render_strips()), frame
        assert written > 0


async def test_widgets_drawn_directly_draw_what_textual_would() -> None:
    """The timeline's lines and the gauges go out as drawn, with the app's filters: the same lines as through
    Textual's own per-line styling."""
    from textual.geometry import Region
    from textual.widget import Widget

    from tokrace.tui.app.render.direct_lines import DirectLines, plain
    from tokrace.tui.app.widgets.gauge import Gauge
    from tokrace.tui.app.widgets.timeline import TimelineLines

    app, clock = demo_app(failing_demo_tiers())
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        origin = app.runner.race.origin if app.runner.race else 0.0
        for t in (1.5, 4.0, 30.0):
            await clock.advance_to(origin + t)
            app.screen.sample(force=True)
            await pilot.pause()
            widgets: list[DirectLines] = [*app.screen.query(TimelineLines), *app.screen.query(Gauge)]
            assert len(widgets) == 4
            for widget in widgets:
                assert plain(widget)
                width, height = widget.size
                for crop in (Region(0, 0, width, height), Region(2, height - 1, width - 5, 1)):
                    direct = widget.render_lines(crop)
                    through_textual = Widget.render_lines(widget, crop)
                    assert [list(strip) for strip in direct] == [list(strip) for strip in through_textual]
                    assert any(strip.text.strip() for strip in direct)


async def test_a_repaint_draws_what_a_refresh_draws_without_a_message() -> None:
    """:func:`repaint` marks what ``refresh`` marks and the screen draws it at its next update, with no message to
    the widget; a widget not on the shown screen, or hidden, is refreshed Textual's way."""
    from textual.app import App, ComposeResult
    from textual.geometry import Region
    from textual.message import Message
    from textual.widget import Widget

    from tokrace.tui.app.render.compositor import repaint
    from tokrace.tui.app.widgets.frame_static import FrameStatic

    class Lines(Widget):
        DEFAULT_CSS = "Lines { height: 3; }"
        text = "a"

        def render_line(self, y: int) -> Strip:
            return Strip([Segment(f"{self.text}{y}".ljust(self.size.width))])

    class Pair(App[None]):
        def compose(self) -> ComposeResult:
            yield Lines()
            yield FrameStatic("first", id="figures")

    sent: list[Message] = []
    app = Pair()
    async with app.run_test(size=(20, 6), message_hook=sent.append) as pilot:
        lines = app.query_one(Lines)
        figures = app.query_one(FrameStatic)
        await pilot.pause()
        sent.clear()
        lines.text = "b"
        repaint(lines, Region(0, 1, 20, 1))
        figures.update("second", layout=False)
        assert lines in app.screen._dirty_widgets and figures in app.screen._dirty_widgets
        assert not [message for message in sent if getattr(message, "_sender", None) in (lines, figures)]
        app.screen._on_timer_update()
        shown = [strip.text for strip in app.screen._compositor.render_strips()]
        assert shown[1].startswith("b1") and shown[0].startswith("a0")  # only the line repainted was drawn anew
        assert any(line.startswith("second") for line in shown)
        figures.display = False
        figures.update("third", layout=False)  # hidden: Textual's refresh, which posts its messages
        assert figures not in app.screen._dirty_widgets
        detached = Lines()
        repaint(detached)  # on no screen: no error, Textual's refresh


async def test_sizes_and_repaints_worked_out_once_a_layout_are_textuals() -> None:
    """The race screen's compositor keeps each shown widget's size and content offset for the layout: what
    ``widget.size`` says, after a resize and after a style that changes the gutter (before and after the layout
    it asks for); and :func:`repaint` marks the same regions dirty as Textual's own ``_set_dirty`` would."""
    from textual.geometry import Region
    from textual.widget import Widget

    from tokrace.tui.app.render.compositor import content_size, repaint

    app, clock = demo_app(demo_tiers())
    async with app.run_test(size=(160, 45)) as pilot:
        screen, compositor, _ = race_compositor(app)
        await app.runner.wait_started()
        await clock.advance(1.0)
        screen.sample(force=True)
        await pilot.pause()

        def check() -> int:
            asked = 0
            for widget in screen.query(Widget):
                assert content_size(widget) == widget.size, widget
                if compositor.geometry(widget) is None:
                    continue
                asked += 1
                width, height = widget.size
                for regions in ((), (Region(0, 0, width, 1),), (Region(1, height - 1, max(width - 2, 1), 1),)):
                    widget._dirty_regions.clear()
                    widget._repaint_regions.clear()
                    repaint(widget, *regions)
                    ours = (set(widget._dirty_regions), set(widget._repaint_regions))
                    widget._dirty_regions.clear()
                    widget._repaint_regions.clear()
                    widget._set_dirty(*regions)
                    assert ours == (set(widget._dirty_regions), set(widget._repaint_regions)), (widget, regions)
            return asked

        assert check() > 10
        await pilot.resize_terminal(100, 30)
        screen.sample(force=True)
        await pilot.pause()
        assert check() > 10
        tail = screen.views[0].tail
        before = content_size(tail)
        tail.styles.padding = (1, 3)  # a new gutter: the size changes now, and again once laid out
        assert content_size(tail) == tail.size != before
        check()
        await pilot.pause()
        assert content_size(tail) == tail.size
        check()


async def test_a_frame_draws_what_it_moved_at_once_without_waking_the_screens_update_timer() -> None:
    """A race frame repaints what moved and the screen's update runs inside the frame: the changes are written when
    the frame ends, and Textual's update timer is left paused (no wake-up of the process of its own per frame)."""
    app, clock = demo_app([TierSpec(name="fast", provider="synthetic", model="m",
                                    options={"ttft_ms": 50, "tok_s": 300, "seed": 4})])
    async with app.run_test(size=(160, 45)) as pilot:
        screen, _, updates = race_compositor(app)
        origin = await first_frame(app, screen, pilot)
        for frame in range(1, 6):
            await clock.advance_to(origin + frame / 15)
            updates.clear()
            screen.sample()
            assert updates, frame  # written inside the frame, before anything else runs
            assert not screen._dirty_widgets and not screen._update_timer._active.is_set(), frame
            assert not screen.frame_open


async def test_a_frame_whose_drawing_fails_says_so_once_and_the_frames_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The frame draws its own update: a failure there is the frame's (one notification), never an exception out
    of the frame timer's task, which would stop every later frame without a word."""
    app, clock = demo_app([TierSpec(name="fast", provider="synthetic", model="m",
                                    options={"ttft_ms": 50, "tok_s": 300, "seed": 4})])
    async with app.run_test(size=(160, 45)) as pilot:
        screen, _, updates = race_compositor(app)
        origin = await first_frame(app, screen, pilot)
        monkeypatch.setattr(RaceScreen, "_on_timer_update", lambda self: 1 / 0)
        for frame in range(1, 4):
            await clock.advance_to(origin + frame / 15)
            screen.sample()  # raises nothing
        monkeypatch.undo()  # (the pilot draws what is left itself as it pauses)
        await pilot.pause()
        said = [n for n in app._notifications if n.title == "a frame could not be drawn"]
        assert [n.message for n in said] == ["ZeroDivisionError: division by zero"]
        updates.clear()
        await clock.advance_to(origin + 4 / 15)
        screen.sample()
        assert updates and not screen._dirty_widgets
