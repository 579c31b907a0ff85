"""Textual's compositor, drawing a partial update from only the lines that changed.

Textual paints a partial update from one rectangle around every region that changed, and asks every widget in
that rectangle for all of its lines: a race frame that moves the text at the top and the timeline at the bottom
has every widget on the screen (the prompt, the footer, the lanes' containers...) hand over every line, to keep
the few that changed. :class:`LineCompositor` asks each widget only for its lines that are redrawn, and skips a
widget on a line where the widgets in front of it already cover all of its part of the line (a lane's container
behind its text). What is painted is the same, cell for cell: the same widgets' same lines, front to back, the
first to cover a part of a line winning as in Textual's own; only lines nobody would see are not asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import cast

from textual._compositor import Compositor
from textual.geometry import Region
from textual.strip import Strip


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
    """A compositor whose partial updates ask widgets only for the lines they redraw (see the module)."""

    def _render_chops(self, crop: Region, is_rendered_line: Callable[[int], bool],
                      ) -> Sequence[Mapping[int, Strip]]:
        cuts = self.cuts
        chops: list[dict[int, Strip | None]] = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
        wanted = runs([y for y in crop.line_range if is_rendered_line(y)])
        if not wanted:
            return cast("Sequence[Mapping[int, Strip]]", chops)
        crop_overlaps = crop.overlaps
        intersection = Region.intersection
        for widget, (region, clip) in self.visible_widgets.items():
            if not crop_overlaps(clip):
                continue
            x, top, width, height = intersection(region, clip)
            if not (width and height):
                continue
            last_x = x + width
            bottom = top + height
            for first, end in wanted:
                first, end = max(first, top), min(end, bottom)
                if first >= end:
                    continue
                # The lines of this run where something of this widget's part is not covered yet
                need = [y for y in range(first, end) if _uncovered(chops[y], cuts[y], x, last_x)]
                for start, stop in runs(need):
                    strips = widget.render_lines(Region(x - region.x, start - region.y, width, stop - start))
                    for y, strip in zip(range(start, stop), strips, strict=False):
                        chops_line = chops[y]
                        final_cuts = [cut for cut in cuts[y] if last_x >= cut >= x]
                        get = chops_line.get
                        for cut, part in zip(final_cuts, strip.divide([cut - x for cut in final_cuts[1:]]),
                                             strict=False):
                            if get(cut) is None:
                                chops_line[cut] = part
        return cast("Sequence[Mapping[int, Strip]]", chops)


def _uncovered(chops_line: dict[int, Strip | None], line_cuts: list[int], x: int, last_x: int) -> bool:
    """Whether a part of the line from ``x`` to ``last_x`` has no strip yet (a widget there would paint it)."""
    get = chops_line.get
    for cut in line_cuts:
        if cut >= last_x:
            return False
        if cut >= x and get(cut) is None:
            return True
    return False
