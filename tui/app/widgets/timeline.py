"""The shared timeline: a row per lane on one time axis with second ticks, segments coloured by kind.

Waiting (connect, pending, wait) is drawn thin, work (think, model, tool, human, retry) as solid blocks, so the two read
apart even without colour. Tool calls that run at the same time get rows of their own under their lane's, so
they show side by side in time. The axis is anchored at the race's start and grows with the longest lane (a loop
runs on through its tools and people); zoom shows its first half, quarter...

The theme says how thick a lane's own row is (``timeline-row-height``: the projector theme draws two terminal rows
per lane); a terminal too short for that gets thinner rows (:func:`fitting_height`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from tokrace.providers.metrics.turn import SegmentSpan
from tokrace.providers.model.kinds import THIN_KINDS
from tokrace.providers.model.units import duration
from tokrace.providers.race.live import LiveLane
from tokrace.themes.loader import timeline_row_height

from ..render import DirectLines, content_size, repaint
from .palette import palette

LABEL_WIDTH: Final[int] = 16
ZOOMS: Final[tuple[int, ...]] = (1, 2, 4, 8)
THIN: Final[frozenset[str]] = THIN_KINDS
SPANS: Final[tuple[float, ...]] = (1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 45, 60, 90, 120, 180, 240,
                                   300, 450, 600, 900, 1200, 1800, 2700, 3600)
TICKS: Final[tuple[float, ...]] = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800)
END_MARK: Final[dict[str, str]] = {"done": "✓", "error": "✗", "stopped": "■"}
MAX_TRACKS: Final[int] = 3
FINAL_ROOM: Final[float] = 1.2
"""A finished race's axis is this much longer than its longest lane when too narrow to work out the room for the end
mark and time exactly."""
"""Rows one lane may take: its own, and two for tool calls running beside another (more share the last)."""
PARALLEL_LABEL: Final[str] = "└ parallel"
SUBAGENT_LABEL: Final[str] = "└ sub-agent"
WORK_GLYPHS: Final[dict[int, tuple[str, ...]]] = {1: ("█",), 2: ("█", "▀"), 3: ("█", "█", "▀")}
"""A work segment's glyph on each line of a lane ``n`` lines tall: solid, ending in an upper half block so a thick
bar keeps half a line clear of the lane below."""
THIN_GLYPHS: Final[dict[int, tuple[str, ...]]] = {1: ("━",), 2: ("▄", " "), 3: (" ", "▀", " ")}
"""A waiting segment's glyph on each line of a lane ``n`` lines tall: a band half a line thick, centred on the work
bar beside it."""
SCREEN_SHARE: Final[int] = 4
"""Thick rows may make the timeline at most a quarter of the terminal's height; past that, rows get thinner (at
80x24 the narrow layout's lanes, summary and footer need the rest, so three lanes there get one line each)."""
_EPS: Final[float] = 1e-9


def axis_span(seconds: float) -> float:
    """A round length for the axis that holds ``seconds`` with a little room, so the axis rescales rarely."""
    want = seconds * 1.1  # room after the longest bar for its end mark and time
    return next((s for s in SPANS if s >= want), math.ceil(want / 3600) * 3600)


def fitted_span(seconds: float, room: float = 1.08) -> float:
    """An axis for a race that no longer grows: ``seconds`` and ``room`` for the end marks (a factor), in whole
    tenths of a second below 10 s and whole seconds above."""
    want = seconds * room
    unit = 0.1 if want < 10 else 1.0
    return math.ceil(want / unit) * unit


def tick_step(span: float, cells: int) -> float:
    """The smallest tick step that keeps tick labels at least 10 cells apart."""
    for step in TICKS:
        if cells * step / span >= 10:
            return step
    return TICKS[-1]


def tick_label(t: float, step: float) -> str:
    """A tick in seconds, as every duration reads ("60 s", "120 s"; never "2m" beside "60s")."""
    return duration(t, 1 if step < 1 else 0)


def tracks(spans: Sequence[SegmentSpan], limit: int = MAX_TRACKS) -> list[list[SegmentSpan]]:
    """A lane's spans on rows: all on the first, except a tool call that starts while another tool call still
    runs, which goes on the first row free at its start, and a sub-agent's spans (those with a ``chain``), which
    keep the row their sub-agent first got, under the lane's own (``limit`` rows at most; more share the last)."""
    rows: list[list[SegmentSpan]] = [[]]
    busy = [-math.inf]  # when the last tool call or sub-agent span on each row ends
    chains: dict[str, int] = {}
    for s in sorted(spans, key=lambda s: (s.start, s.end)):
        if s.kind != "tool" and s.chain is None:
            rows[0].append(s)
            continue
        row = chains.get(s.chain) if s.chain is not None else None
        if row is None:
            first = 1 if s.chain is not None else 0
            row = next((i for i, end in enumerate(busy) if i >= first and end <= s.start + _EPS), None)
        if row is None:
            if len(rows) < limit:
                rows.append([])
                busy.append(-math.inf)
            row = len(rows) - 1
        if s.chain is not None:
            chains[s.chain] = row
        rows[row].append(s)
        busy[row] = max(busy[row], s.end)
    return rows


@dataclass(frozen=True, slots=True)
class RowLook:
    """What one line of a row shows: its lane (colours), which of the row's lines, the label and how it looks
    ("", "dim" or "bold"), runs of (kind or nothing, cells), and the end mark (cell, text, whether an error)."""

    lane: int
    line: int
    label: str
    label_look: str
    runs: tuple[tuple[str | None, int], ...]
    end: tuple[int, str, bool] | None


_LOOKS: Final[dict[str, Style]] = {"dim": Style(dim=True), "bold": Style(bold=True)}
_ERROR_MARK: Final[Style] = Style(color="red", bold=True)


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the timeline: a lane's own row (track 0) or a row of its parallel tool calls."""

    lane: int
    track: int
    spans: list[SegmentSpan]


def fitting_height(wanted: int, rows: Sequence[Row], screen_height: int) -> int:
    """How many lines each lane's own row gets: ``wanted`` (the theme's), or less when the timeline (its lanes'
    rows, its parallel rows, the axis) would then take more than a quarter of the screen; never under one."""
    lanes = sum(1 for row in rows if not row.track)
    for height in range(wanted, 1, -1):
        if len(rows) + lanes * (height - 1) + 1 <= screen_height // SCREEN_SHARE:
            return height
    return 1


def paint(segments: list[tuple[str, float, float]], span: float, cells: int) -> list[str | None]:
    """The kind drawn in each cell: segments in start order, each at least one cell wide, later ones on top."""
    out: list[str | None] = [None] * cells
    if cells <= 0 or span <= 0:
        return out
    per = cells / span
    for kind, start, end in segments:
        if start >= span:
            continue
        first = int(start * per)
        last = min(max(first + 1, math.ceil(min(end, span) * per)), cells)
        if last > first:
            out[first:last] = [kind] * (last - first)
    return out


class TimelineLines(DirectLines):
    """What draws the timeline's lines, inside its border and padding: they go out as drawn (see
    :mod:`.direct`), where drawn by the timeline itself every line that moved would go through Textual's styling."""

    DEFAULT_CSS = """
    TimelineLines { width: 1fr; height: auto; }
    """

    def __init__(self, timeline: Timeline) -> None:
        super().__init__()
        self.timeline = timeline

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self.timeline.get_content_height(container, viewport, width)

    def render_line(self, y: int) -> Strip:
        return self.timeline.render_line(y)

    def lines_in(self, lines: range) -> list[Strip]:
        _, strips = self.timeline._draw()  # once for all the lines asked for
        return [strips[y] if y < len(strips) else self.timeline.render_line(y) for y in lines]


class Timeline(Widget):
    """A row per lane (as thick as the theme asks) and an axis row; the screen sets ``now`` and calls ``refresh``
    at a few hertz."""

    DEFAULT_CSS = """
    Timeline { height: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lanes: list[LiveLane] = []
        self.now = 0.0
        self.zoom = 1
        self.strong = False
        """The presenter's view: the axis and each lane's end mark in full contrast, never dim or pale."""
        self.overlay: Callable[[int, float], list[SegmentSpan]] | None = None
        """Extra spans drawn on top of a lane's own (the voice lens's stalls): (lane index, now) -> spans."""
        self.rows: list[Row] = []
        """What each row draws, as of the last sample."""
        self._lines: tuple[list[Row], int, list[tuple[Row, int]]] = ([], 1, [])
        self._drawn: tuple[tuple[object, ...], list[Strip]] | None = None
        """Every line as last drawn, and what it was drawn from (rows, time, size, style, zoom)."""
        self._rows_drawn: tuple[tuple[object, ...], dict[int, tuple[RowLook, Strip]]] = ((), {})
        """Each line above the axis as last drawn, and what it shows; for the size, style, zoom and row height."""
        self._axis_drawn: tuple[tuple[object, ...], Strip] | None = None
        """The axis as last drawn, and what it was drawn from (cells, span, style, zoom, width)."""
        self.drawn = TimelineLines(self)
        """What shows the lines (this widget draws its border and padding around them)."""

    def compose(self) -> ComposeResult:
        yield self.drawn

    def on_mount(self) -> None:
        # Another theme may ask for other row heights: lay out again (a theme change alone only repaints).
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh(layout=True))

    def bind(self, lanes: list[LiveLane]) -> None:
        self.lanes = lanes
        self._update_rows()
        self.refresh(layout=True)

    def sample(self, now: float) -> None:
        """Move to ``now`` and repaint the lines that changed (none when the bars moved less than a cell)."""
        self.now = now
        before = self._drawn
        if self._update_rows() or before is None:
            self.refresh(layout=True)
            return
        key, strips = self._draw()
        if key[2:] != before[0][2:]:  # another size, style, zoom or row height: everything moves
            self.drawn.refresh()
            return
        width = content_size(self).width
        old = before[1]
        changed = [Region(0, y, width, 1) for y, strip in enumerate(strips)
                   if y >= len(old) or (strip is not old[y] and strip != old[y])]
        if changed or len(strips) != len(before[1]):
            repaint(self.drawn, *changed)

    def _update_rows(self) -> bool:
        """Cut every lane's spans into rows at ``now``; True when the number of rows changed. Parallel rows fold
        into fewer (at the least, each lane's own) where they would take more than a quarter of the screen: on
        a short terminal the lanes above keep their rows (60×20 at the end of a loop keeps every lane in view)."""
        room = max(self.app.size.height // SCREEN_SHARE, len(self.lanes) + 1) - 1  # lines above the axis
        spans = [lane.segments(self.now) for lane in self.lanes]
        for limit in range(MAX_TRACKS, 0, -1):
            rows = []
            for index, lane_spans in enumerate(spans):
                lane_rows = tracks(lane_spans, limit)
                if self.overlay is not None:  # drawn over the lane's own row
                    lane_rows[0] = [*lane_rows[0], *self.overlay(index, self.now)]
                rows += [Row(index, track, row) for track, row in enumerate(lane_rows)]
            if len(rows) <= room:
                break
        changed = len(rows) != len(self.rows)
        self.rows = rows
        return changed

    def cycle_zoom(self) -> int:
        """Zoom in one step (after the deepest, back to the whole race); returns the new zoom."""
        self.zoom = ZOOMS[(ZOOMS.index(self.zoom) + 1) % len(ZOOMS)] if self.zoom in ZOOMS else 1
        self.drawn.refresh()
        return self.zoom

    @property
    def row_height(self) -> int:
        """How many lines each lane's own row takes now: the theme's ``timeline-row-height``, as far as it fits."""
        return fitting_height(timeline_row_height(self.app.theme_variables), self.rows, self.app.size.height)

    def lines(self) -> list[tuple[Row, int]]:
        """Every line above the axis: the row it belongs to, and which of that row's lines it is."""
        rows, height = self.rows, self.row_height
        if self._lines[0] is not rows or self._lines[1] != height:  # worked out once per sample, not per line
            self._lines = (rows, height, [(row, line) for row in rows for line in range(1 if row.track else height)])
        return self._lines[2]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines()) + 1

    @property
    def span(self) -> float:
        """The seconds the axis shows: a round length with room to grow while lanes run; once every lane has
        ended, just the race and room for its end marks (a 127 s loop on a 180 s axis reads as a longer race)."""
        longest = max((lane.elapsed(self.now) for lane in self.lanes), default=self.now)
        if self.lanes and all(lane.finished for lane in self.lanes) and longest > 0:
            cells = max(content_size(self).width - LABEL_WIDTH, 1)
            mark = 1 + max(len(f"■ {duration(lane.e2e or 0.0)}") for lane in self.lanes)  # the end mark and time
            room = cells / (cells - mark) if cells > 3 * mark else FINAL_ROOM
            return fitted_span(longest, room) / self.zoom
        return axis_span(longest) / self.zoom

    def render_line(self, y: int) -> Strip:
        _, strips = self._draw()
        if y < len(strips):
            return strips[y]
        return Strip.blank(self.size.width, self.visual_style.rich_style)

    def _draw(self) -> tuple[tuple[object, ...], list[Strip]]:
        """Every line above the axis and the axis, drawn once for the rows, time, size, style and zoom of now."""
        width = content_size(self).width
        base = self.visual_style.rich_style
        lines = self.lines()
        key = (self.now, self.rows, width, base, palette(self.app), self.zoom, self._lines[1])
        drawn = self._drawn
        if drawn is not None and drawn[0][0] == key[0] and drawn[0][1] is key[1] and drawn[0][2:] == key[2:]:
            return drawn
        cells = max(width - LABEL_WIDTH, 1)
        span = self.span
        if self._rows_drawn[0] != key[2:]:  # another size, style, zoom or row height: every line drawn afresh
            self._rows_drawn = (key[2:], {})
        drawn_rows = self._rows_drawn[1]
        strips = []
        for y, (row, line) in enumerate(lines):
            look = self._describe_row(row, line, cells, span)
            before = drawn_rows.get(y)
            if before is None or before[0] != look:  # a line whose bars moved less than a cell is kept
                height = 1 if row.track else self._lines[1]
                before = drawn_rows[y] = (look, self._draw_row(look, height, base).adjust_cell_length(width, base))
            strips.append(before[1])
        axis_key = (cells, span, base, self.zoom, width)
        if self._axis_drawn is None or self._axis_drawn[0] != axis_key:  # the axis moves only when it rescales
            self._axis_drawn = (axis_key, self._axis(cells, span, base).adjust_cell_length(width, base))
        strips.append(self._axis_drawn[1])
        self._drawn = (key, strips)
        return self._drawn

    def _lane_row(self, row: Row, line: int, height: int, cells: int, span: float, base: Style) -> Strip:
        """Line ``line`` of a row ``height`` lines tall: the label and end mark on the first, bars on every one."""
        return self._draw_row(self._describe_row(row, line, cells, span), height, base)

    def _describe_row(self, row: Row, line: int, cells: int, span: float) -> RowLook:
        """What a line of a row shows, in a form to compare with the last frame's (drawing it costs more)."""
        index = row.lane
        lane = self.lanes[index]
        if line:
            label, look = " " * LABEL_WIDTH, ""
        elif row.track:
            label = SUBAGENT_LABEL if any(s.chain is not None for s in row.spans) else PARALLEL_LABEL
            label, look = label.ljust(LABEL_WIDTH), "dim"
        else:
            name = lane.tier.name
            label = (name if len(name) < LABEL_WIDTH - 1 else name[: LABEL_WIDTH - 2] + "…").ljust(LABEL_WIDTH)
            look = "bold"
        kinds = paint([(s.kind, s.start, s.end) for s in row.spans], span, cells)
        runs = tuple((kind, len(list(same))) for kind, same in itertools.groupby(kinds))  # runs, not cells
        end_cell = cells - 1 - (runs[-1][1] if runs and runs[-1][0] is None else 0)
        mark = END_MARK.get(lane.state)
        e2e = lane.e2e
        end: tuple[int, str, bool] | None = None
        if mark and not row.track and not line and end_cell + 1 < cells:
            text = f"{mark} {duration(e2e)}"  # "—" for a lane that never ran
            if end_cell + 1 + len(text) > cells:
                text = mark
            end = (LABEL_WIDTH + end_cell + 1, text, lane.state == "error")
        return RowLook(index, line, label, look, runs, end)

    def _draw_row(self, look: RowLook, height: int, base: Style) -> Strip:
        pal = palette(self.app)
        label_style = base if not look.label_look else base + pal.lane(look.lane) + _LOOKS[look.label_look]
        segments = [Segment(look.label, label_style)]
        work, thin = WORK_GLYPHS[height][look.line], THIN_GLYPHS[height][look.line]
        for run_kind, run in look.runs:
            if run_kind is None:
                segments.append(Segment(" " * run, base))
                continue
            glyph = thin if run_kind in THIN else work
            style = pal.segment(run_kind)
            if glyph == "█" and height > 1:  # filled behind too, so the lines of a thick bar join up
                style += Style(bgcolor=style.color)
            segments.append(Segment(glyph * run, base + style))
        if look.end is not None:
            at, text, error = look.end
            style = base + (_ERROR_MARK if error else pal.lane(look.lane)) + Style(bold=self.strong)
            segments = _overwrite(segments, at, text, style)
        return Strip(segments)

    def _axis(self, cells: int, span: float, base: Style) -> Strip:
        step = tick_step(span, cells)
        line = [" "] * cells
        t = 0.0
        while t <= span + 1e-9:
            pos = round(t / span * cells)
            text = "▏" + tick_label(t, step)
            if pos + len(text) <= cells:
                line[pos: pos + len(text)] = list(text)
            t += step
        zoom = f"zoom ×{self.zoom}" if self.zoom > 1 else ""
        head = zoom.ljust(LABEL_WIDTH)[:LABEL_WIDTH]
        axis = Style(bold=True) if self.strong else Style(dim=True)
        return Strip([Segment(head, base + Style(bold=True)), Segment("".join(line), base + axis)])


def _overwrite(segments: list[Segment], at: int, text: str, style: Style) -> list[Segment]:
    """Write ``text`` from cell ``at`` of the row, over whatever was there."""
    strip = Strip(segments)
    left = strip.crop(0, at)
    right = strip.crop(at + len(text), strip.cell_length)
    return [*left, Segment(text, style), *right]
