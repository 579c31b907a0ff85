"""Textual's compositor, drawing a partial update from only the parts of lines that changed.

Textual paints a partial update from one rectangle around every region that changed, and asks every widget in
that rectangle for all of its lines: a race frame that moves the text at the top and the timeline at the bottom
has every widget on the screen (the prompt, the footer, the lanes' containers...) hand over every line, to keep
the few that changed. :class:`LineCompositor` asks a widget only for its lines where it shows something that is
written out: a part of the line that changed, not yet covered by a widget in front of it (a lane's container is
not asked for the lines of the text it holds, nor for its border beside them, which did not change). What is
written is the same, cell for cell: the same widgets' same lines, front to back, the first to cover a part of a
line winning, as in Textual's own; only parts nobody writes out are not drawn. A full update draws everything.

:func:`repaint` marks a part of a widget for the next update the way the screen would once told, without the
messages that tell it (see the function).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from rich.console import Console, RenderableType
from textual._compositor import ChopsUpdate, Compositor
from textual.dom import NoScreen
from textual.geometry import Offset, Region, Size
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

Spans = dict[int, list[tuple[int, int]]]
"""The parts of each line to write out: line -> (first cell, end cell) pairs."""


def repaint(widget: Widget, *regions: Region) -> None:
    """Repaint ``regions`` of ``widget`` (its content's coordinates; all of it when none) at the screen's next
    update, without a layout pass: what ``widget.refresh(*regions)`` does, without its messages.

    ``refresh`` goes through messages: the widget is prompted, goes idle, posts an update to its screen, which is
    prompted, goes idle, and starts its update timer; for the few widgets a race frame repaints, that cost about as
    much as sampling the lanes. Here the widget's caches are cleared and its regions marked dirty as ``refresh``
    does, and the screen takes the widget and starts its update timer at once, as its handlers would. Whenever
    they would not (the screen not shown, an update batch open, the widget hidden or not mounted), it is
    ``refresh`` after all.
    """
    try:
        screen = widget.screen
    except NoScreen:  # not on a screen (yet): Textual's own way (its own, not one a widget overrides with this)
        Widget.refresh(widget, *regions)
        return
    if not (widget.is_mounted and widget.display and screen.is_current and not widget.app._batch_count
            and screen in screen._compositor):
        Widget.refresh(widget, *regions)
        return
    widget._layout_cache.clear()  # the caches ``refresh`` clears
    compositor = screen._compositor
    geometry = compositor.geometry(widget) if isinstance(compositor, LineCompositor) else None
    if geometry is None:
        widget._set_dirty(*regions)
    else:  # what ``_set_dirty`` does, from the size and offset worked out once a layout
        size, offset = geometry
        if regions:
            dirty = [region.translate(offset) for region in regions]
            widget._dirty_regions.update(dirty)
            widget._repaint_regions.update(dirty)
            widget._styles_cache.set_dirty(*dirty)
        else:
            widget._dirty_regions.clear()
            widget._repaint_regions.clear()
            widget._styles_cache.clear()
            widget._styles_cache.set_dirty(size.region)
            outer = widget.outer_size
            widget._dirty_regions.add(outer.region)
            if outer:
                widget._repaint_regions.add(outer.region)
    widget.clear_cached_dimensions()
    widget._rich_style_cache.clear()
    screen._dirty_widgets.add(widget)
    if not getattr(screen, "frame_open", False):  # else the frame draws it when it ends (``RaceScreen.sample``)
        screen._update_timer.resume()


def content_size(widget: Widget) -> Size:
    """``widget.size`` (the size of its content), worked out once a layout for a widget a race screen shows rather
    than from the screen's map and the widget's styles each time it is asked (a dozen times a frame, ~15 µs each)."""
    try:
        compositor = widget.screen._compositor
    except NoScreen:
        return widget.size
    geometry = compositor.geometry(widget) if isinstance(compositor, LineCompositor) else None
    return widget.size if geometry is None else geometry[0]


def runs(lines: list[int]) -> list[tuple[int, int]]:
    """Sorted line numbers as runs of consecutive lines: (first, end) pairs, ``end`` excluded."""
    out: list[tuple[int, int]] = []
    for y in lines:
        if out and out[-1][1] == y:
            out[-1] = (out[-1][0], y + 1)
        else:
            out.append((y, y + 1))
    return out


class LineCompositor(Compositor):
    """A compositor whose partial updates ask widgets only for what is written out (see the module), and which
    keeps an update the app would throw away for the next one."""

    def __init__(self, held: Callable[[], bool] = lambda: False) -> None:
        super().__init__()
        self.held = held
        """Whether the app would drop an update drawn now: while an update batch is open (all of the app's start,
        when the screen is first laid out), Textual draws the update, clearing what changed, and writes nothing."""
        self.first_frame: list[Callable[[], object]] | None = []
        """Called (each once, in order) when the screen's first frame has been drawn; ``None`` once it has."""

    _spans: Spans | None = None
    """The parts of lines the partial update being drawn writes out (``None``: all of every line drawn)."""
    _shown: tuple[object, list[tuple[Widget, Region, int, int, int, int]]] = (None, [])
    """For the visible widgets of the last layout (by identity): each widget front to back, its region, and the
    part of it on screen (x, y, width, height), widgets with nothing on screen left out."""

    _geometry: tuple[object, dict[Widget, tuple[int, Size, Offset]]] = (None, {})
    """For the visible widgets of the last layout (by identity): each widget's content size and offset, as of its
    styles (by their cache key), as far as asked for."""

    def geometry(self, widget: Widget) -> tuple[Size, Offset] | None:
        """``widget.size`` and ``widget.content_offset`` as of the last layout, worked out once for it and its styles;
        ``None`` for a widget not visible in it (ask the widget)."""
        visible = self.visible_widgets
        if self._geometry[0] is not visible:
            self._geometry = (visible, {})
        if widget not in visible:
            return None
        known = self._geometry[1]
        key = widget.styles._cache_key
        found = known.get(widget)
        if found is None or found[0] != key:  # a style may change the gutter before the next layout
            found = known[widget] = (key, widget.size, widget.content_offset)
        return found[1], found[2]

    def render_update(self, full: bool = False, screen_stack: list[Screen[object]] | None = None,
                      simplify: bool = False) -> RenderableType | None:
        # An update drawn in a batch is never written: what changed stays to be drawn by the first one that is (the
        # screen's first frame, whole, rather than a part of it one layout later and the rest a frame after).
        if not full and self.held():
            return None
        update = super().render_update(full, screen_stack, simplify)
        if update is not None and not full and self.first_frame is not None:
            waiting, self.first_frame = self.first_frame, None
            for callback in waiting:
                callback()
        return update

    def render_partial_update(self) -> ChopsUpdate | None:
        # Textual's own, but the parts of lines written out are known to the drawing (``_render_chops``).
        update_regions = self._dirty_regions.copy()
        self._dirty_regions.clear()
        if not update_regions:
            return None
        crop = Region.from_union(update_regions).intersection(self.size.region)
        spans = list(self._regions_to_spans(update_regions))
        by_line: Spans = {}
        for y, x1, x2 in spans:
            by_line.setdefault(y, []).append((x1, x2))
        self._spans = by_line
        try:
            chops = self._render_chops(crop, by_line.__contains__)
        finally:
            self._spans = None
        cuts = self.cuts
        ends: list[list[int]] = [[]] * len(cuts)  # only the lines written out are looked at
        for y in by_line:
            ends[y] = cuts[y][1:]
        return LineChopsUpdate(chops, spans, ends)

    def _on_screen(self) -> list[tuple[Widget, Region, int, int, int, int]]:
        """The visible widgets front to back with the part of each on screen (see ``_shown``), worked out once a
        layout rather than once a frame."""
        visible = self.visible_widgets
        if self._shown[0] is not visible:
            shown = []
            for widget, (region, clip) in visible.items():
                x, y, width, height = region.intersection(clip)
                if width and height:
                    shown.append((widget, region, x, y, width, height))
            self._shown = (visible, shown)
        return self._shown[1]

    def _render_chops(self, crop: Region, is_rendered_line: Callable[[int], bool],
                      ) -> Sequence[Mapping[int, Strip]]:
        cuts = self.cuts
        chops: list[dict[int, Strip | None]] = [{}] * len(cuts)  # a line not drawn is never looked at
        spans = self._spans
        todo: dict[int, list[int]] = {}
        """Line -> where the parts of it still to draw start (a part: from one cut to the next, written out)."""
        for y in crop.line_range:
            if not is_rendered_line(y):
                continue
            line_cuts = cuts[y]
            if spans is None:
                starts = line_cuts[:-1]
            else:  # the parts (from a cut to the next) that overlap a span: for each span, by bisection
                line_spans = spans[y]
                picked: list[int] = []
                for x1, x2 in line_spans:
                    first = max(bisect.bisect_right(line_cuts, x1) - 1, 0)
                    picked += line_cuts[first:min(bisect.bisect_left(line_cuts, x2), len(line_cuts) - 1)]
                starts = sorted(set(picked)) if len(line_spans) > 1 else picked
            if starts:
                todo[y] = starts
                chops[y] = dict.fromkeys(line_cuts[:-1])
        lines = sorted(todo)
        # A widget that covers the start of a part still to draw covers all of it (a widget's edges are cuts), so
        # the widgets to ask are those whose part on screen holds one of those starts.
        for widget, region, x, top, width, height in self._on_screen():  # front to back
            if not lines:
                break
            if top > lines[-1] or top + height <= lines[0]:
                continue
            last_x = x + width
            need = [y for y in lines[bisect.bisect_left(lines, top):bisect.bisect_left(lines, top + height)]
                    if _starts_within(todo[y], x, last_x)]
            if not need:
                continue
            for start, stop in runs(need):
                strips = widget.render_lines(Region(x - region.x, start - region.y, width, stop - start))
                for y, strip in zip(range(start, stop), strips, strict=False):
                    chops_line = chops[y]
                    line_cuts = cuts[y]
                    final_cuts = line_cuts[bisect.bisect_left(line_cuts, x):bisect.bisect_right(line_cuts, last_x)]
                    if len(final_cuts) == 2 and strip.cell_length == width:  # one part: the strip as it is
                        if chops_line[x] is None:
                            chops_line[x] = strip
                    else:
                        get = chops_line.get
                        for cut, part in zip(final_cuts, strip.divide([cut - x for cut in final_cuts[1:]]),
                                             strict=False):
                            if get(cut) is None:
                                chops_line[cut] = part
                    left = [cut for cut in todo[y] if chops_line[cut] is None]
                    if left:
                        todo[y] = left
                    else:
                        del todo[y]
            lines = [y for y in lines if y in todo]
        return cast("Sequence[Mapping[int, Strip]]", chops)


class LineChopsUpdate(ChopsUpdate):
    """Textual's partial update, turned into a terminal's escape sequences without building a Rich ``Control`` for
    every cursor move (two objects and a format, ~6 µs each, for each of the ~30 parts of lines a frame writes):
    the same text, character for character."""

    def render_segments(self, console: Console) -> str:
        sequences: list[str] = []
        append = sequences.append
        chops = self.chops
        chop_ends = self.chop_ends
        last_y = self.spans[-1][0]
        for y, x1, x2 in self.spans:
            line = chops[y]
            ends = chop_ends[y]
            row = f"\x1b[{y + 1};"
            for end, (x, strip) in zip(ends, line.items(), strict=False):
                if strip is None or x > x2 or end <= x1:
                    continue
                if not (x2 > x >= x1 and end <= x2):  # the part reaches past the span: cut to it, as Textual does
                    strip = strip.crop(0, min(end, x2) - x)
                append(f"{row}{x + 1}H")  # rich's Control.move_to(x, y)
                append(strip.render(console))
            if y != last_y:
                append("\n")
        return "".join(sequences)


def _starts_within(starts: list[int], x: int, last_x: int) -> bool:
    """Whether one of the sorted ``starts`` is in ``[x, last_x)``."""
    index = bisect.bisect_left(starts, x)
    return index < len(starts) and starts[index] < last_x
