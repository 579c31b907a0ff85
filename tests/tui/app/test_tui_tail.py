"""The streaming tail wraps only the new text each frame and repaints only the lines that changed, and what it
shows is exactly what wrapping the text in one go shows: for any appends (wide characters, newlines, runs of
spaces, words longer than a line), any resizes, any frames."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.segment import Segment
from rich.style import Style
from rich.terminal_theme import DEFAULT_TERMINAL_THEME
from textual.app import App, ComposeResult
from textual.color import Color
from textual.filter import ANSIToTruecolor, DimFilter, LineFilter, Monochrome, NoColor
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from tokrace.providers.model.events import Delta, Request
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.live import LiveLane
from tokrace.tui.app.render.direct_lines import filtered_styles
from tokrace.tui.app.widgets.printable import printable
from tokrace.tui.app.widgets.tail import Line, TailText, Wrapper, joined, wrap

CHANNELS = ("content", "reasoning", "tool_args", "meta")
WORDS = ("a", "to", "the ", " quick", "brown ", "\n", "\n\n", "  ", " ", "速度", "é", "ｗｉｄｅ", "🙂 ",
         "supercalifragilistic", "x" * 23, "速" * 9, "tab\tbed", " end.")

runs_strategy = st.lists(st.tuples(st.sampled_from(CHANNELS),
                                   st.text(alphabet=st.sampled_from("ab 速\né🙂-"), max_size=12)
                                   | st.sampled_from(WORDS)), max_size=40)


def shown(lines: list[Line], height: int, width: int) -> list[str]:
    """What the widget shows of a whole wrap: the last ``height`` lines, less a trailing empty one, in ``width``
    cells (a character wider than the whole line does not show)."""
    if len(lines) > 1 and not lines[-1]:
        lines = lines[:-1]
    return text_of([Strip([Segment(text) for text, _ in line]).adjust_cell_length(width) for line in lines[-height:]])


@settings(max_examples=500, deadline=None)
@given(runs=runs_strategy, width=st.integers(1, 30), keeps=st.lists(st.integers(1, 6), max_size=40))
def test_feeding_runs_one_by_one_gives_the_lines_of_one_whole_wrap(runs: list[tuple[str, str]], width: int,
                                                                   keeps: list[int]) -> None:
    wrapper = Wrapper(width)
    for i, (channel, text) in enumerate(runs):
        wrapper.feed(channel, text)
        if i < len(keeps):
            wrapper.trim(keeps[i])
        whole = wrap(joined(runs[: i + 1]), width)  # one run per channel in a row: words split by runs joined
        assert len(wrapper.lines) + wrapper.dropped == len(whole)
        assert wrapper.lines == whole[len(whole) - len(wrapper.lines):]


one_cell_runs = st.lists(st.tuples(st.sampled_from(CHANNELS),
                                   st.text(alphabet=st.sampled_from("ab \n—é\tx"), max_size=30)
                                   | st.sampled_from(WORDS)), max_size=40)


@settings(max_examples=1000, deadline=None)
@given(runs=one_cell_runs, width=st.integers(1, 30), keeps=st.lists(st.integers(1, 6), max_size=40))
def test_a_line_at_a_time_wraps_as_a_word_at_a_time(runs: list[tuple[str, str]], width: int,
                                                    keeps: list[int]) -> None:
    """Text of one-cell characters is laid out a line at a time: the same lines, and the same state to go on
    from (the cells used, the word left open), as the word loop gives, after every run."""
    fast, slow = Wrapper(width), Wrapper(width, fast=False)
    for i, (channel, text) in enumerate(runs):
        fast.feed(channel, text)
        slow.feed(channel, text)
        if i < len(keeps):
            fast.trim(keeps[i])
            slow.trim(keeps[i])
        assert (fast.lines, fast.used, fast.open, fast.dropped) == (slow.lines, slow.used, slow.open, slow.dropped)


def test_a_line_at_a_time_is_what_wraps_plain_text() -> None:
    calls = []

    class Counted(Wrapper):
        def _feed_lines(self, channel: str, text: str, used: int) -> None:
            calls.append(text)
            super()._feed_lines(channel, text, used)

    wrapper = Counted(10)
    wrapper.feed("content", "plain text — with a dash,\ttab\nand a new line")
    wrapper.feed("content", "速度")  # two cells a character: a word at a time
    wrapper.feed("content", "\u00a0no-break space")  # a space that is not " ": a word at a time
    assert calls == ["plain text — with a dash, tab\nand a new line"]


def test_a_word_split_across_tokens_wraps_as_one_word() -> None:
    tokens = [("content", "hello wor"), ("content", "ld, and mor"), ("content", "e")]
    assert [text for line in wrap(tokens, 10) for text, _ in line] == ["hello ", "world, and", "more"]
    spaces = [("content", "ab  "), ("content", "   "), ("content", "cd")]  # a run of spaces over two tokens
    assert wrap(spaces, 6) == wrap([("content", "ab     cd")], 6) == [[("ab", "content")], [("cd", "content")]]
    channels = [("reasoning", "thin"), ("content", "king")]  # another channel is another word
    assert wrap(channels, 6) == [[("thin", "reasoning")], [("king", "content")]]


def test_trimmed_lines_still_count_a_wrapped_line_drops_its_leading_space() -> None:
    wrapper = Wrapper(3)
    wrapper.feed("content", "aaa ")  # the space breaks the line: the next line starts empty
    wrapper.trim(1)
    assert (wrapper.lines, wrapper.dropped) == ([[]], 1)
    wrapper.feed("content", " b")
    assert wrapper.lines == [[("b", "content")]]
    assert wrap([("content", "aaa "), ("content", " b")], 3)[-1:] == wrapper.lines


class TailApp(App[None]):
    def __init__(self, lane: LiveLane) -> None:
        super().__init__()
        self.tail = TailText(lane)

    def compose(self) -> ComposeResult:
        yield self.tail


def text_of(strips: list[Strip]) -> list[str]:
    return ["".join(segment.text for segment in strip).rstrip() for strip in strips]


class Reference:
    """What the tail must show, worked out the slow way: the visible tail taken afresh at the first frame, after
    a resize, or when more than a screenful came since the last frame; then every new piece after it."""

    def __init__(self, lane: LiveLane) -> None:
        self.lane = lane
        self.runs: list[tuple[str, str]] = []
        self.pending: list[tuple[str, str]] = []
        self.size: tuple[int, int] | None = None

    def frame(self, width: int, height: int) -> list[str]:
        budget = (height + 1) * (width + 1)
        if self.size != (width, height) or sum(len(text) for _, text in self.pending) > budget:
            self.size = (width, height)
            self.runs = self.lane.tail(budget)
        else:
            self.runs += self.pending
        self.pending = []
        return shown(wrap(self.runs, width), height, width)


async def test_the_tail_shows_what_a_whole_wrap_shows_and_repaints_every_line_that_changed() -> None:
    rng = random.Random(12)
    lane = LiveLane(TierSpec(name="t", provider="synthetic", model="m"))
    lane.on_event(Request(t=0.0))
    app = TailApp(lane)
    reference = Reference(lane)
    sizes = [(40, 10), (12, 5), (1, 3), (7, 1), (33, 8), (80, 20)]
    async with app.run_test(size=(90, 24)) as pilot:
        tail = app.tail
        refreshed: list[tuple[Region, ...]] = []
        set_dirty = tail._set_dirty  # where a refresh, or a repaint without its messages, marks what to draw

        def spy(*regions: Region) -> None:
            refreshed.append(regions)
            set_dirty(*regions)

        tail._set_dirty = spy  # type: ignore[method-assign]
        t = 0.0
        for step in range(400):
            if step % 60 == 0:
                width, height = sizes[(step // 60) % len(sizes)]
                tail.styles.width, tail.styles.height = width, height
                await pilot.pause()
                assert tuple(tail.size) == (width, height)
            for _ in range(rng.choice((0, 1, 1, 2, 5, 30, 120 if step % 37 == 0 else 3))):
                t += 0.001
                piece = (rng.choice(CHANNELS), rng.choice(WORDS))
                lane.on_event(Delta(t=t, text=piece[1], channel=piece[0]))  # type: ignore[arg-type]
                reference.pending.append(piece)
            before = text_of(tail.render_lines(Region(0, 0, width, height)))
            refreshed.clear()
            tail.sync()
            after = text_of(tail.render_lines(Region(0, 0, width, height)))
            expected = reference.frame(width, height)
            assert after == expected + [""] * (height - len(expected)), step
            changed = {y for y in range(height) if before[y] != after[y]}
            if changed:
                assert refreshed, step
            whole = any(not regions for regions in refreshed)
            covered = {y for regions in refreshed for region in regions for y in region.line_range}
            assert whole or changed <= covered, step


async def test_a_new_lane_is_wrapped_afresh() -> None:
    first = LiveLane(TierSpec(name="a", provider="synthetic", model="m"))
    second = LiveLane(TierSpec(name="b", provider="synthetic", model="m"))
    for lane, text in ((first, "first lane's text"), (second, "second")):
        lane.on_event(Request(t=0.0))
        lane.on_event(Delta(t=0.1, text=text))
    app = TailApp(first)
    async with app.run_test(size=(30, 5)) as pilot:
        tail = app.tail
        tail.sync()
        assert text_of(tail.render_lines(Region(0, 0, 30, 1))) == ["first lane's text"]
        tail.bind(second)
        await pilot.pause()
        assert text_of(tail.render_lines(Region(0, 0, 30, 1))) == ["second"]


def test_control_characters_are_drawn_as_pictures_never_sent_to_the_terminal() -> None:
    assert printable("a\x1b[2Jb\tc\r\nd\x07\x9b31m\x7f") == "a␛[2Jb c \nd␇\ufffd31m␡"
    assert printable("plain text, 速度 🙂\n") == "plain text, 速度 🙂\n"
    lines = wrap([("content", "clear\x1b[2J"), ("content", "\x1b]0;title\x07 done")], 20)
    drawn = "".join(text for line in lines for text, _ in line)
    assert drawn == "clear␛[2J␛]0;title␇ done"
    assert all(ch == "\n" or ch.isprintable() for ch in drawn)


async def test_the_tail_draws_no_control_character() -> None:
    lane = LiveLane(TierSpec(name="t", provider="synthetic", model="m"))
    lane.on_event(Request(t=0.0))
    for i, text in enumerate(["Hello ", "world\x1b[2J", " red\x1b[31m?", "\ttab", " bell\x07\r\n", "end\x9b"]):
        lane.on_event(Delta(t=0.1 * (i + 1), text=text))
    app = TailApp(lane)
    async with app.run_test(size=(30, 6)):
        app.tail.sync()
        shown = text_of(app.tail.render_lines(Region(0, 0, 30, 6)))
    assert shown[:3] == ["Hello world␛[2J red␛[31m? tab", "bell␇", "end\ufffd"]
    assert all(ch.isprintable() for line in shown for ch in line)


class Shout(LineFilter):
    """A line filter Textual does not ship: it changes text, not only styles (lines must be filtered one by one)."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [Segment(text.upper(), style, control) for text, style, control in segments]


STYLES = {"plain": Style(bgcolor="#000000"), "dim": Style(dim=True, color="#ff0000", bgcolor="#203040"),
          "both": Style(color="bright_green", bgcolor="blue"),
          "rgb": Style(color="#102030", italic=True, bgcolor="black")}
"""Styles as a widget draws in (a background always: Textual's dimming needs one)."""


@pytest.mark.parametrize("filters", [(), (ANSIToTruecolor(DEFAULT_TERMINAL_THEME),), (Monochrome(),), (NoColor(),),
                                     (DimFilter(),), (ANSIToTruecolor(DEFAULT_TERMINAL_THEME), DimFilter())])
def test_styles_filtered_once_are_what_each_segment_filtered_gets(filters: tuple[LineFilter, ...]) -> None:
    background = Color(10, 20, 30)
    filtered = filtered_styles(STYLES, filters, background)
    assert filtered is not None
    for name, style in STYLES.items():
        segments = [Segment("text", style)]
        for line_filter in filters:
            segments = line_filter.apply(segments, background)
        assert segments == [Segment("text", filtered[name])], name


def test_a_filter_that_may_change_more_than_styles_filters_each_line() -> None:
    assert filtered_styles(STYLES, (ANSIToTruecolor(DEFAULT_TERMINAL_THEME), Shout()), Color(0, 0, 0)) is None


@pytest.mark.parametrize("extra", [(), (Monochrome(),), (DimFilter(),), (Shout(),)])
async def test_lines_drawn_directly_are_the_lines_textual_would_draw(extra: tuple[LineFilter, ...]) -> None:
    """Under the app's own filters and more (in styles filtered once, or each line filtered when a filter may do
    more than restyle)."""
    lane = LiveLane(TierSpec(name="t", provider="synthetic", model="m"))
    lane.on_event(Request(t=0.0))
    for i, (channel, text) in enumerate([("reasoning", "thinking it over "), ("content", "the answer, "),
                                         ("tool_args", '{"path": "x"}'), ("meta", "\n\n"), ("content", "速度 more")]):
        lane.on_event(Delta(t=0.1 * (i + 1), text=text, channel=channel))  # type: ignore[arg-type]
    app = TailApp(lane)
    app._filters += extra
    async with app.run_test(size=(24, 8)):
        tail = app.tail
        tail.sync()
        for crop in (Region(0, 0, 24, 8), Region(3, 1, 10, 4)):
            direct = tail.render_lines(crop)
            assert tail._plain()
            through_textual = Widget.render_lines(tail, crop)  # Textual's own per-line styling pipeline
            assert [list(strip) for strip in direct] == [list(strip) for strip in through_textual]
            assert any(strip.text.strip() for strip in direct)
            tail.render_lines(crop)
            assert (tail._filtered_map is None) == any(isinstance(f, Shout) for f in extra)  # which way it drew
