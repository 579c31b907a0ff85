"""Lines that go out as a widget draws them, when Textual has nothing to add to them.

Textual draws every line of a widget through its styling pipeline (borders, padding, tint, opacity, hatch), and
before that works out the widget's colours from its ancestors: a tenth of a millisecond a widget, each time one of
its lines changed. A widget with none of those styles would get its lines back as it drew them, with the app's
line filters applied; :class:`DirectLines` hands them over so, and draws through Textual's pipeline otherwise.
"""

from __future__ import annotations

from typing import Final

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import ANSIToTruecolor, DimFilter, LineFilter, Monochrome, NoColor
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from .compositor import content_size


def plain(widget: Widget, padding: bool = False) -> bool:
    """No border, padding (unless ``padding``: left and right only, then in the background), outline, tint, hatch
    or opacity: Textual would draw each line as it is given (between its padding)."""
    styles = widget.styles
    top, _, bottom, _ = styles.padding
    spaced = any(edge for edge, _ in styles.border) or top or bottom if padding else any(styles.gutter)
    return (not spaced and not any(edge for edge, _ in styles.outline) and not styles.tint.a
            and styles.text_opacity == 1 and widget.opacity == 1
            and not (styles.has_rule("hatch") and styles.hatch != "none"))


STYLE_FILTERS: Final[tuple[type[LineFilter], ...]] = (ANSIToTruecolor, DimFilter, Monochrome, NoColor)
"""Textual's line filters that change each segment's style by that style alone (and the background), never its
text: a line drawn in styles already filtered is the line filtered."""


def filtered_styles(styles: dict[str, Style], filters: tuple[LineFilter, ...], background: Color | None,
                    ) -> dict[str, Style] | None:
    """``styles`` with the app's ``filters`` applied to each, as they would apply to a segment in that style; ``None``
    when a filter may do more than change styles one by one (then it must filter each line as drawn)."""
    if not all(type(line_filter) in STYLE_FILTERS for line_filter in filters):
        return None
    out = {}
    for name, style in styles.items():
        segments = [Segment(" ", style)]
        for line_filter in filters:
            segments = line_filter.apply(segments, background)  # type: ignore[arg-type]
        filtered = segments[0].style
        out[name] = filtered if filtered is not None else style
    return out


Look = tuple[bool, tuple[LineFilter, ...], Color | None]
"""Whether a widget draws plainly, the app's line filters, and the background they apply on."""


def look(widget: Widget, memo: list[object], padding: bool = False) -> Look:
    """:func:`plain`, the app's line filters and the widget's background, worked out again only when the
    widget's or an ancestor's styles changed or the filters did (``memo`` keeps them: [key, look]); working them
    out walks the widget's ancestors. ``padding``: as :func:`plain`."""
    filters = tuple(widget.get_line_filters())
    key = (filters, *(node.styles._cache_key for node in widget.ancestors_with_self))
    if memo and memo[0] == key:
        return memo[1]  # type: ignore[return-value]
    is_plain = plain(widget, padding)
    background = widget.background_colors[1] if is_plain and filters else None
    result: Look = (is_plain, filters if is_plain else (), background)
    memo[:] = [key, result]
    return result


class DirectLines(Widget):
    """A widget whose lines (from :meth:`render_line`, each as wide as the widget) go out as drawn when it is
    :func:`plain`, with the app's line filters applied as Textual applies them."""

    _look_memo: list[object]

    def lines_in(self, lines: range) -> list[Strip]:
        """The lines (as :meth:`render_line` draws them) to hand over."""
        return [self.render_line(y) for y in lines]

    def render_lines(self, crop: Region) -> list[Strip]:
        if not hasattr(self, "_look_memo"):
            self._look_memo = []
        is_plain, filters, background = look(self, self._look_memo)
        if not is_plain:
            return super().render_lines(crop)
        strips = self.lines_in(crop.line_range)
        if filters:
            for index, strip in enumerate(strips):
                for line_filter in filters:
                    strip = strip.apply_filter(line_filter, background)  # type: ignore[arg-type]  # kept on the strip
                strips[index] = strip
        if crop.column_span != (0, content_size(self).width):
            x1, x2 = crop.column_span
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips
