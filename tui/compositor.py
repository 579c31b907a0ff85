"""Textual's compositor, drawing a partial update from only the parts of lines that changed.

Textual paints a partial update from one rectangle around every region that changed, and asks every widget in
that rectangle for all of its lines: a race frame that moves the text at the top and the timeline at the bottom
has every widget on the screen (the prompt, the footer, the lanes' containers...) hand over every line, to keep
the few that changed. :class:`LineCompositor` asks a widget only for its lines where it shows something that is
written out: a part of the line that changed, not yet covered by a widget in front of it (a lane's container is
not asked for the lines of the text it holds, nor for its border beside them, which did not change). What is
written is the same, cell for cell: the same widgets' same lines, front to back, the first to cover a part of a
line winning, as in Textual's own; only parts nobody writes out are not drawn. A full update draws everything.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from rich.console import Console
from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.strip import Strip

Spans = dict[int, list[tuple[int, int]]]
"""The parts of each line to write out: line -> (first cell, end cell) pairs."""


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
    """A compositor whose partial updates ask widgets only for what is written out (see the module)."""

    _spans: Spans | None = None
    """The parts of lines the partial update being drawn writes out (``None``: all of every line drawn)."""

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
        return LineChopsUpdate(chops, spans, [cut_set[1:] for cut_set in self.cuts])

    def _render_chops(self, crop: Region, is_rendered_line: Callable[[int], bool],
                      ) -> Sequence[Mapping[int, Strip]]:
        cuts = self.cuts
        chops: list[dict[int, Strip | None]] = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
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
        lines = sorted(todo)
        crop_overlaps = crop.overlaps
        intersection = Region.intersection
        for widget, (region, clip) in self.visible_widgets.items():  # front to back
            if not lines:
                break
            if not crop_overlaps(clip):
                continue
            x, top, width, height = intersection(region, clip)
            if not (width and height):
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
