"""The streaming text of a lane: only the visible tail is wrapped and drawn, line by line (the Line API).

History lives in the live model, never in the widget: the widget keeps just the lines it shows. Each frame wraps
only the text that came since the last one onto them (a new size wraps the visible tail again), and draws only
the lines that changed, so the cost per frame is the new text and the lines it moved, never the length of the
answer.
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import Final

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import LineFilter
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from tokrace.providers.race.live import LiveLane

from ..render import content_size, filtered_styles, look, plain, repaint
from .palette import palette
from .printable import printable

_WORD: Final[re.Pattern[str]] = re.compile(r"\n|[^\S\n]+|\S+")
_SPACES: Final[re.Pattern[str]] = re.compile(" +")
_ONE_CELL: Final[set[str]] = {chr(code) for code in range(0x20, 0x7F)} | {"\n"}
_NOT_ONE_CELL: Final[set[str]] = set()
"""Characters seen that are (not) one cell wide and not a space (but " "); the newline is in too: text made only
of those is wrapped a line at a time (:meth:`Wrapper._feed_lines`). Each character is looked at once."""


def one_cell(text: str) -> bool:
    """Whether every character of ``text`` (made printable) is one cell wide, and its only spaces are " " and
    newlines."""
    if text.isascii() or _ONE_CELL.issuperset(text):  # printable ASCII is always: most text, at C speed
        return True
    for ch in set(text).difference(_ONE_CELL):
        if ch not in _NOT_ONE_CELL and not ch.isspace() and ch.isprintable() and cell_len(ch) == 1:
            _ONE_CELL.add(ch)
        else:
            _NOT_ONE_CELL.add(ch)
            return False
    return True


Line = list[tuple[str, str]]
"""One wrapped line: (text, channel) runs."""


def _width(text: str) -> int:
    return len(text) if text.isascii() else cell_len(text)


def wrap(runs: list[tuple[str, str]], width: int) -> list[Line]:
    """Word-wrap (channel, text) runs to ``width`` cells; words longer than a line are cut. A word may come in
    several runs of one channel (a model's tokens split words): it wraps as one word."""
    wrapper = Wrapper(width)
    for channel, text in runs:
        wrapper.feed(channel, text)
    return wrapper.lines


class Wrapper:
    """Word wrap fed one run at a time: after any sequence of :meth:`feed` calls, :attr:`lines` ends with exactly
    the lines :func:`wrap` gives for every run fed so far (only the first ones are gone once :meth:`trim` dropped
    them), and the same lines as for those runs joined into one per channel. Feeding a run costs its own length,
    never the length of what came before: the new text continues the last line where the previous text left it,
    and a word (or a run of spaces) the previous text left open is taken back and wrapped again with what
    continues it."""

    __slots__ = ("dropped", "fast", "lines", "open", "used", "width")

    def __init__(self, width: int, fast: bool = True) -> None:
        self.width = max(width, 1)
        self.fast = fast
        """Lay out text of one-cell characters a line at a time (:meth:`_feed_lines`) rather than a word at a
        time: the same lines, at a fraction of the cost (off only to check that)."""
        self.lines: list[Line] = [[]]
        self.used = 0
        """Cells used on the last line."""
        self.dropped = 0
        """Lines trimmed from the front (they still count: a wrapped line never starts with a space)."""
        self.open: tuple[str, int, int, bool] | None = None
        """What the last run left open at the end of the last line: (channel, characters, cells used before
        them, whether they are spaces). More of the same in the same channel is one word with them."""

    def feed(self, channel: str, text: str) -> None:
        if not text:
            return
        text = printable(text)  # a terminal obeys control characters: never send the model's to it
        width, lines, used = self.width, self.lines, self.used
        if self.open is not None:
            open_channel, chars, before, spaces = self.open
            self.open = None
            if open_channel == channel and text[0] != "\n" and text[0].isspace() == spaces:
                line = lines[-1]
                kept, run_channel = line[-1]
                text = kept[-chars:] + text
                if len(kept) == chars:
                    line.pop()
                else:
                    line[-1] = (kept[:-chars], run_channel)
                used = before
        if self.fast and one_cell(text):
            self._feed_lines(channel, text, used)
            return
        ascii_only = text.isascii()
        parts: list[str] = []
        """This run's text on the last line so far, added to the line once it is done (not word by word)."""
        word = ""
        placed = False
        for word in _WORD.findall(text):
            placed = False
            if word == "\n":
                if parts:
                    _add(lines[-1], "".join(parts), channel)
                    parts = []
                lines.append([])
                used = 0
                continue
            size = len(word) if ascii_only else _width(word)
            if word.isspace():
                if used == 0 and len(lines) + self.dropped > 1:
                    continue  # a wrapped line does not start with the space that broke it
                if used + size > width:
                    if parts:
                        _add(lines[-1], "".join(parts), channel)
                        parts = []
                    lines.append([])
                    used = 0
                    continue
            elif used + size > width and used > 0:
                if parts:
                    _add(lines[-1], "".join(parts), channel)
                    parts = []
                lines.append([])
                used = 0
            while size > width:  # a word wider than the line: cut it
                head = word[:width] if ascii_only or word.isascii() else _cut(word, width)
                parts.append(head)
                _add(lines[-1], "".join(parts), channel)
                parts = []
                lines.append([])
                word = word[len(head):]
                size = len(word) if ascii_only else _width(word)
                used = 0
            parts.append(word)
            placed = bool(word)  # a word cut to the end leaves nothing open: what follows starts a new piece
            used += size
        if parts:
            _add(lines[-1], "".join(parts), channel)
        if placed:
            self.open = (channel, len(word), used - (len(word) if ascii_only else _width(word)), word.isspace())
        self.used = used

    def _feed_lines(self, channel: str, text: str, used: int) -> None:
        """:meth:`feed` for text whose every character is one cell wide and whose only spaces are " " and newlines
        (what most answers are): each line is laid out at once, its end found by searching the text for the last
        break that fits, instead of a word at a time. The same lines as the word loop, by the same rules: a word
        goes on the line if it fits, else it starts the next (cut when wider than a line); a run of spaces stays
        at the end of its line if it fits, else it breaks the line and goes; a wrapped line does not start with
        spaces (only the very first line may)."""
        width, lines = self.width, self.lines
        end_of_text = len(text)
        pos = 0
        chunk_start = -1
        """Where the last piece of text put on a line started (``-1``: nothing put since the last break)."""
        placed_to = -1
        """Where the last piece put on a line ended."""
        while pos < end_of_text:
            newline = text.find("\n", pos)
            if newline < 0:
                newline = end_of_text
            while pos < newline:
                if used == 0 and text[pos] == " " and len(lines) + self.dropped > 1:
                    pos = _after_spaces(text, pos)
                    continue
                end = pos + width - used
                if end <= pos:  # the line is full (a wide character can overfill a line one cell wide)
                    take = 0
                elif end >= newline:
                    take = newline - pos
                elif text[end] == " ":  # the line ends in the spaces that reach past it, or just before them
                    take = len(text[pos:end].rstrip(" "))
                else:  # the line ends in a word: break after the last space before it
                    take = text.rfind(" ", pos, end) + 1 - pos
                    take = max(take, 0)
                if take > 0:
                    _add(lines[-1], text[pos:pos + take], channel)
                    chunk_start, pos = pos, pos + take
                    placed_to = pos
                    used += take
                    if pos < newline:  # what comes next does not fit: the next line
                        lines.append([])
                        used = 0
                elif used > 0:  # nothing more fits on this line
                    lines.append([])
                    used = 0
                elif text[pos] == " ":  # spaces wider than the whole (first) line: they break it and go
                    pos = _after_spaces(text, pos)
                    lines.append([])
                else:  # a word wider than the line: cut it
                    _add(lines[-1], text[pos:pos + width], channel)
                    chunk_start, pos = pos, pos + width
                    placed_to = pos
                    lines.append([])
            if newline < end_of_text:
                lines.append([])
                used = 0
                pos = newline + 1
        self.used = used
        if placed_to == end_of_text and lines[-1]:  # the last word or spaces may go on with the next text
            last = text[-1]
            start = len(text.rstrip(" ")) if last == " " else max(text.rfind(" "), text.rfind("\n")) + 1
            chars = end_of_text - max(start, chunk_start)
            self.open = (channel, chars, used - chars, last == " ")

    def trim(self, keep: int) -> None:
        """Keep only the last ``keep`` lines (at least one: the line the next text continues)."""
        extra = len(self.lines) - max(keep, 1)
        if extra > 0:
            del self.lines[:extra]
            self.dropped += extra


def joined(pieces: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Pieces of one channel in a row as one run (wrapping one run costs less than wrapping its pieces, and gives
    the same lines)."""
    if not pieces:
        return []
    channels, texts = zip(*pieces, strict=True)
    if channels.count(channels[0]) == len(channels):  # one channel (most frames): one join, no loop
        return [(channels[0], "".join(texts))]
    runs: list[tuple[str, list[str]]] = []
    for channel, text in pieces:
        if runs and runs[-1][0] == channel:
            runs[-1][1].append(text)
        else:
            runs.append((channel, [text]))
    return [(channel, "".join(texts)) for channel, texts in runs]


def _add(line: Line, text: str, channel: str) -> None:
    """Append to a line, joining runs of one channel (one segment to draw per run, not per word)."""
    if line and line[-1][1] == channel:
        line[-1] = (line[-1][0] + text, channel)
    else:
        line.append((text, channel))


def _after_spaces(text: str, pos: int) -> int:
    """Where the run of spaces at ``pos`` ends."""
    match = _SPACES.match(text, pos)
    return match.end() if match else pos


def _cut(word: str, width: int) -> str:
    out = ""
    for ch in word:
        if cell_len(out + ch) > width:
            break
        out += ch
    return out or word[0]


class TailText(Widget):
    """The last lines of a lane's text. :meth:`sync` (once a frame, when the lane changed) wraps only the text that
    came since the last sync onto the lines kept, and repaints only the lines that changed (every line once the
    text scrolls); a change of lane or size wraps the visible tail again from the lane. Drawing shows the lines
    as of the last sync, so a frame never paints half of one state and half of another."""

    DEFAULT_CSS = """
    TailText { height: 1fr; }
    """

    def __init__(self, lane: LiveLane | None = None, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lane = lane
        self._layout: tuple[int, int, int] | None = None
        """(lane, width, height) the lines were wrapped for."""
        self._wrapper = Wrapper(1)
        self._last: tuple[str, str] | None = None
        """The lane's last piece already wrapped (by identity: the lane keeps each piece as it came)."""
        self._version = -1
        self._strips: list[Strip | None] = []
        """The drawn line for each of the wrapper's lines, once drawn (``None``: to draw)."""
        self._styles_key: tuple[object, ...] | None = None
        self._style_map: dict[str, Style] = {}
        self._blank: Strip | None = None
        """A line below the text, as drawn."""
        self._look_memo: list[object] = []
        self._filtered_map: dict[str, Style] | None = None
        """The channel styles (and the base's, as "") with the app's filters applied, for the filters of the last
        key; ``None`` when the filters must apply to each line as drawn (see :func:`.direct.filtered_styles`)."""
        self._pass: tuple[int, Style, dict[str, Style], range, tuple[LineFilter, ...], Color | None,
                          dict[str, Style] | None] = (0, Style(), {}, range(0), (), None, None)
        """What every line of one drawing pass needs: width, base style, channel styles, lines shown, the app's
        filters to apply and the background they apply on (none when Textual's own pipeline draws the lines), and
        the channel styles already filtered (``None``: filter each line)."""

    def bind(self, lane: LiveLane) -> None:
        self.lane = lane
        self._layout = None
        self.refresh()

    def sync(self) -> None:
        """Catch up with the lane's text, and repaint what that changed: the lines from the first one that
        changed to the bottom while nothing scrolled, every line once it did (or the lane or the size changed)."""
        size = content_size(self)
        width, height = size
        top = self._wrapper.dropped + self._shown(height).start
        first = self._update(size)
        if first is None:
            return
        shown = self._shown(height)
        if first < 0 or self._wrapper.dropped + shown.start != top:
            repaint(self)
        elif first < shown.stop:
            y = max(first - shown.start, 0)
            repaint(self, Region(0, y, width, height - y))

    def _update(self, size: Size) -> int | None:
        """Bring the lines up to the lane's text: ``None`` when nothing changed, -1 when every line was wrapped
        again, else the index (in :attr:`_wrapper` lines) of the first line that changed."""
        width, height = size
        lane = self.lane
        layout = (id(lane), width, height)
        if layout != self._layout:
            self._layout = layout
            self._rewrap(size)
            return -1
        if lane is None or lane.version == self._version or height <= 0:
            return None  # nothing new, or no room to show it (a new size wraps the visible tail afresh)
        self._version = lane.version
        new = self._new_pieces(lane)
        if new is None:
            self._rewrap(size)
            return -1
        if not new:
            return None
        runs = joined(new)
        if sum(len(text) for _, text in runs) > (height + 1) * (width + 1):
            self._rewrap(size)  # more came than the lines shown hold: wrapping the visible tail again costs less
            return -1
        wrapper = self._wrapper
        count = len(wrapper.lines)
        for channel, text in runs:
            wrapper.feed(channel, text)
        self._last = new[-1]
        strips = self._strips
        strips[count - 1:] = [None] * (len(wrapper.lines) - count + 1)
        drop = len(wrapper.lines) - (height + 1)
        if drop > 0:
            wrapper.trim(height + 1)
            del strips[:drop]
        return count - 1 - max(drop, 0)

    def _new_pieces(self, lane: LiveLane) -> list[tuple[str, str]] | None:
        """The pieces the lane got since the last one wrapped, oldest first; ``None`` when that piece is gone."""
        last = self._last
        if last is None:
            return None
        pieces = lane.pieces
        # How far from the end the last piece wrapped is, by identity (equal pieces recur: " the"), looked for
        # from the end without a step of Python per piece.
        back = next(itertools.compress(itertools.count(), map(operator.is_, reversed(pieces), itertools.repeat(last))),
                    None)
        if back is None:
            return None
        new = list(itertools.islice(reversed(pieces), back))
        new.reverse()
        return new

    def _rewrap(self, size: Size) -> None:
        """Wrap the lane's visible tail afresh (a new lane, a new size, or too much new text)."""
        width, height = size
        lane = self.lane
        self._wrapper = wrapper = Wrapper(width)
        self._last = None
        self._version = lane.version if lane is not None else -1
        if lane is not None and height > 0:
            for channel, text in joined(lane.tail((height + 1) * (width + 1))):
                wrapper.feed(channel, text)
            wrapper.trim(height + 1)
            if lane.pieces:
                self._last = lane.pieces[-1]
        self._strips = [None] * len(wrapper.lines)
        self._blank = None

    def _shown(self, height: int) -> range:
        """Which of the wrapper's lines are on screen: the last ``height``, less a trailing empty line (a newline
        at the end does not push the text up)."""
        lines = self._wrapper.lines
        end = len(lines)
        if end + self._wrapper.dropped > 1 and not lines[-1]:
            end -= 1
        return range(max(end - height, 0), end)

    def render_lines(self, crop: Region) -> list[Strip]:
        size = content_size(self)
        if self._layout != (id(self.lane), *size):  # drawn before a sync at this size
            self._update(size)
        base = self.visual_style.rich_style
        # Nothing of Textual's own styling to draw around or over the text: its per-line pipeline would hand back
        # the lines as they are, so they go out directly, each drawn once with the app's filters applied (as that
        # pipeline applies them) and kept so.
        plain, filters, background = look(self, self._look_memo)
        styles = self._styles(base, filters, background)
        self._pass = (size.width, base, styles, self._shown(size.height), filters, background,
                      self._filtered_map)  # once a pass, not once a line
        if not plain:
            return super().render_lines(crop)
        strips = [self._line(y) for y in crop.line_range]
        if crop.column_span != (0, size.width):
            x1, x2 = crop.column_span
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def _plain(self) -> bool:
        """No border, padding, outline, tint, hatch or opacity: Textual would draw each line as it is given."""
        return plain(self)

    def render_line(self, y: int) -> Strip:
        """A line as Textual's own pipeline asks for it: without the app's filters (that pipeline applies them)."""
        width, base, _, shown, filters, _, _ = self._pass
        if filters:  # the lines kept were drawn filtered, to go out directly: draw them as they are
            self._pass = (width, base, self._styles(base, (), None), shown, (), None, self._filtered_map)
        return self._line(y)

    def _line(self, y: int) -> Strip:
        width, base, styles, shown, filters, background, filtered = self._pass
        index = shown.start + y
        if index >= shown.stop:
            if self._blank is None:
                self._blank = self._filtered(Strip.blank(width, base), filters, background)
            return self._blank
        strip = self._strips[index]
        if strip is None:
            line = self._wrapper.lines[index]
            cells = sum(cell_len(text) for text, _ in line)
            if cells <= width and filtered is not None:  # in styles already filtered: the line filtered, made once
                pad = filtered[""]
                segments = [Segment(text, filtered.get(channel, pad)) for text, channel in line]
                if cells < width:
                    segments.append(Segment(" " * (width - cells), pad))
                strip = Strip(segments, width)
                self._strips[index] = strip
                return strip
            segments = [Segment(text, styles.get(channel, base)) for text, channel in line]
            if cells <= width:  # one strip of the full width, filtered as it is made (not a strip per step)
                if cells < width:
                    segments.append(Segment(" " * (width - cells), base))
                for line_filter in filters:
                    segments = line_filter.apply(segments, background)  # type: ignore[arg-type]
                strip = Strip(segments, width)
            else:  # a character wider than the whole line
                strip = self._filtered(Strip(segments).adjust_cell_length(width, base), filters, background)
            self._strips[index] = strip
        return strip

    @staticmethod
    def _filtered(strip: Strip, filters: tuple[LineFilter, ...], background: Color | None) -> Strip:
        for line_filter in filters:
            strip = strip.apply_filter(line_filter, background)  # type: ignore[arg-type]
        return strip

    def _styles(self, base: Style, filters: tuple[LineFilter, ...], background: Color | None) -> dict[str, Style]:
        """The style of each channel; a change of style, palette or filters draws every line again."""
        pal = palette(self.app)
        key = (base, pal, filters, background)
        if self._styles_key != key:
            self._styles_key = key
            self._strips = [None] * len(self._strips)
            self._blank = None
            self._style_map = {
                "content": base,
                "reasoning": base + Style(dim=True, italic=True),
                "tool_args": base + pal.segment("tool"),
                "meta": base + Style(dim=True),
            }
            self._filtered_map = filtered_styles({**self._style_map, "": base}, filters, background)
        return self._style_map
