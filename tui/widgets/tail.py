"""The streaming text of a lane: only the visible tail is wrapped and drawn, line by line (the Line API).

History lives in the live model, never in the widget: each frame wraps just enough trailing characters to fill
the widget, so the cost per frame is the size of the widget, not the length of the answer.
"""

from __future__ import annotations

import re
from typing import Final

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from providers.live import LiveLane

from .palette import palette

_WORD: Final[re.Pattern[str]] = re.compile(r"\n|[^\S\n]+|\S+")

Line = list[tuple[str, str]]
"""One wrapped line: (text, channel) runs."""


def _width(text: str) -> int:
    return len(text) if text.isascii() else cell_len(text)


def wrap(runs: list[tuple[str, str]], width: int) -> list[Line]:
    """Word-wrap (channel, text) runs to ``width`` cells; words longer than a line are cut."""
    width = max(width, 1)
    lines: list[Line] = [[]]
    used = 0
    for channel, text in runs:
        for word in _WORD.findall(text):
            if word == "\n":
                lines.append([])
                used = 0
                continue
            size = _width(word)
            if word.isspace():
                if used == 0 and len(lines) > 1:
                    continue  # a wrapped line does not start with the space that broke it
                if used + size > width:
                    lines.append([])
                    used = 0
                    continue
            elif used + size > width and used > 0:
                lines.append([])
                used = 0
            while size > width:  # a word wider than the line: cut it
                head = word[:width] if word.isascii() else _cut(word, width)
                _add(lines[-1], head, channel)
                lines.append([])
                word = word[len(head):]
                size = _width(word)
                used = 0
            _add(lines[-1], word, channel)
            used += size
    return lines


def _add(line: Line, text: str, channel: str) -> None:
    """Append to a line, joining runs of one channel (one segment to draw per run, not per word)."""
    if line and line[-1][1] == channel:
        line[-1] = (line[-1][0] + text, channel)
    else:
        line.append((text, channel))


def _cut(word: str, width: int) -> str:
    out = ""
    for ch in word:
        if cell_len(out + ch) > width:
            break
        out += ch
    return out or word[0]


class TailText(Widget):
    """The last lines of a lane's text, re-wrapped only when the lane or the size changed."""

    DEFAULT_CSS = """
    TailText { height: 1fr; }
    """

    def __init__(self, lane: LiveLane | None = None, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lane = lane
        self._key: tuple[object, ...] | None = None
        self._lines: list[Line] = []
        self._styles_key: tuple[Style, object] | None = None
        self._style_map: dict[str, Style] = {}

    def bind(self, lane: LiveLane) -> None:
        self.lane = lane
        self._key = None
        self.refresh()

    def _visible(self) -> list[Line]:
        width, height = self.size
        lane = self.lane
        key = (id(lane), lane.version if lane else 0, width, height)
        if key != self._key:
            self._key = key
            if lane is None or height <= 0:
                self._lines = []
            else:
                lines = wrap(lane.tail((height + 1) * (width + 1)), width)
                if len(lines) > 1 and not lines[-1]:
                    lines.pop()  # a trailing newline does not push the text up
                self._lines = lines[-height:]
        return self._lines

    def render_line(self, y: int) -> Strip:
        base = self.visual_style.rich_style
        lines = self._visible()
        if y >= len(lines):
            return Strip.blank(self.size.width, base)
        styles = self._styles(base)
        segments = [Segment(text, styles.get(channel, base)) for text, channel in lines[y]]
        return Strip(segments).adjust_cell_length(self.size.width, base)

    def _styles(self, base: Style) -> dict[str, Style]:
        pal = palette(self.app)
        key = (base, pal)
        if self._styles_key != key:
            self._styles_key = key
            self._style_map = {
                "content": base,
                "reasoning": base + Style(dim=True, italic=True),
                "tool_args": base + pal.segment("tool"),
                "meta": base + Style(dim=True),
            }
        return self._style_map
