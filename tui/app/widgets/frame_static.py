"""A Static whose content changes at frame rate (a lane's figures, the line under the timeline)."""

from __future__ import annotations

from typing import Any, Self

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.visual import VisualType
from textual.widgets import Static

from ..render import compositor, content_size, look


class FrameStatic(Static):
    """A :class:`Static` repainted without messages (:func:`tokrace.tui.app.render.compositor.repaint`) when its
    content changes and
    its size does not (``update(..., layout=False)``): it is drawn in the frame's screen update, with the frame's
    other repaints, not in an update of its own a moment later."""

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False,
                ) -> Self:
        if repaint and not (layout or recompose):
            compositor.repaint(self, *regions)
            return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)


class StatusLine(FrameStatic):
    """A :class:`FrameStatic` for a line that changes every frame (the race's status line): :meth:`show_line` keeps
    the text as it is and draws it as one strip of its styled runs between its padding, without Textual's visual
    (the text converted, measured and wrapped, then split into strips) or its styling pipeline: most of the line's
    cost a frame at 12,000 tok/s (``scripts/bench_status_line.py``). The same text again draws nothing. A text
    that would wrap (wider than the line, or a line break), a widget not one row high or a line not aligned left
    goes through :meth:`update` as any other, and a widget styled beyond padding through Textual's pipeline, so
    it looks the same either way."""

    def __init__(self, content: VisualType = "", **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._line: Text | None = None
        self._line_key: object = None
        self._strip: Strip | None = None
        self._look_memo: list[object] = []

    def show_line(self, line: Text) -> None:
        """Show ``line`` (one row, its size unchanged: ``update(line, layout=False)``, cheaper)."""
        key = (line.plain, list(line.spans), line.style)  # a copy: spans compare by value (Span is a NamedTuple)
        if key == self._line_key:
            return
        width, height = content_size(self)
        if (height != 1 or "\n" in line.plain or line.cell_len > width
                or self.styles.text_align not in ("left", "start")):
            self.update(line, layout=False)
            return
        self._line, self._line_key, self._strip = line, key, None
        self.refresh()

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        self._line, self._line_key, self._strip = None, None, None
        super().update(content, layout=layout)

    @property
    def content(self) -> VisualType:
        return self._line if self._line is not None else super().content

    @content.setter
    def content(self, content: VisualType) -> None:
        self._line, self._line_key, self._strip = None, None, None
        Static.content.fset(self, content)  # type: ignore[attr-defined]

    def render_line(self, y: int) -> Strip:
        line = self._line
        if line is None:
            return super().render_line(y)
        width = content_size(self).width
        base = self.visual_style.rich_style
        if y:
            return Strip.blank(width, base)
        if self._strip is None:  # the text's own style under its spans' (``render`` leaves it to the caller)
            console = self.app.console
            style = base + console.get_style(line.style) if line.style else base
            segments = [Segment(segment.text, style + segment.style if segment.style else style)
                        for segment in line.render(console) if segment.text]
            # each run carries its offset in the text, as Textual marks a visual's runs for selecting text; the rest
            # of the row is in the background alone, as Textual fills a visual's line (and its padding)
            self._strip = Strip(segments).apply_offsets(0, 0).adjust_cell_length(width, Style(bgcolor=base.bgcolor))
        return self._strip

    def render_lines(self, crop: Region) -> list[Strip]:
        """The line between its padding (in the background alone, as Textual pads) when nothing else styles the
        widget's lines, without Textual's pipeline; through it otherwise."""
        if self._line is None or content_size(self).height != 1:
            return super().render_lines(crop)
        is_plain, filters, background = look(self, self._look_memo, padding=True)
        if not is_plain:
            return super().render_lines(crop)
        _, right, _, left = self.styles.padding
        strip = self.render_line(0)
        fill = Style(bgcolor=self.visual_style.rich_style.bgcolor)
        line = Strip.join([Strip.blank(left, fill), strip, Strip.blank(right, fill)])
        for line_filter in filters:
            line = line.apply_filter(line_filter, background)  # type: ignore[arg-type]
        x1, x2 = crop.column_span
        if (x1, x2) != (0, line.cell_length):
            line = line.crop(x1, x2)
        return [line if y == 0 else Strip.blank(crop.width, fill) for y in crop.line_range]
