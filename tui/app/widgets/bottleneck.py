"""The bottleneck view: per lane, where the loop's time went (seconds and share by part), the model's share, the
Amdahl bound and what a model N× faster would do; across lanes, measured end-to-end speed-up next to token speed-up.

Live while the race runs (from each lane's live state, the loop so far), final once it is over
(``tokrace.providers.metrics.loop`` over each lane's events: the figures ``tokrace bench`` prints). A single prompt is a
loop of one turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tokrace.providers.metrics.loop import WHAT_IF_FACTOR, Bottleneck, LoopMetrics, bottlenecks, loop_metrics
from tokrace.providers.model.events import SEGMENT_KINDS, Error, Event, is_loop_end
from tokrace.providers.model.kinds import THIN_KINDS
from tokrace.providers.model.tiers import TierSpec, reference_name
from tokrace.providers.model.units import duration, percent
from tokrace.providers.race.live import LiveLane

from .palette import palette
from .summary import finishes, join_runs

if TYPE_CHECKING:
    from tokrace.providers.runs.runner import RaceRunner

FACTORS: Final[tuple[float, ...]] = (1.5, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0, 14.0, 20.0, 30.0, 50.0, 100.0, 1000.0)
"""The N of "a model N× faster" steps through these; 14 (Ultrafast over standard) to start."""

PART_ORDER: Final[tuple[str, ...]] = ("model", *SEGMENT_KINDS)
"""The parts in column order: the model's time first, then each other kind of segment."""

BAR_CELLS: Final[int] = 24
"""The width of the bar that splits each lane's loop into its parts."""

WIDE: Final[int] = 130
"""From this width the view draws the bars."""

MIN_PART_S: Final[float] = 0.05
"""Shorter parts are left out of the view: on the real clock, the microseconds between a loop's steps."""

GAP: Final[str] = "  "
"""Between two columns."""

NARROW: Final[int] = 110
"""Below this width each lane's figures are a paragraph rather than a row of columns."""


APPROVAL_MARK: Final[str] = "(+approval)"
"""The end of a tool segment's label whose time includes a person's approval (an imported trace's)."""


def part_names(lanes: Sequence[LiveLane]) -> dict[str, str]:
    """What to call each part: ``tool (+approval)`` when a lane's tool time includes approvals."""
    approvals = any(s.kind == "tool" and s.label.endswith(APPROVAL_MARK) for lane in lanes for s in lane.explicit)
    return {"tool": f"tool {APPROVAL_MARK}"} if approvals else {}


def step_factor(factor: float, step: int) -> float:
    """The next N up (``step`` > 0) or down the ladder of :data:`FACTORS`, staying at its ends."""
    if step > 0:
        return next((f for f in FACTORS if f > factor), FACTORS[-1])
    return next((f for f in reversed(FACTORS) if f < factor), FACTORS[0])


def final_loop(events: Sequence[Event], tier: TierSpec) -> LoopMetrics:
    """A lane's loop from its events, as bench computes it; a single prompt is a loop of its one turn, whole when
    that turn ended well (it has no loop's end event to wait for)."""
    m = loop_metrics(events, tier.price, tier.model)
    if not any(is_loop_end(e) for e in events):
        failed = next((t for t in m.turns if not t.ok), None)
        # A loop stopped or failed between its turns (during a tool or a person) has no failed turn, but its
        # lane's error still says it never finished.
        lane_error = next((e for e in events if isinstance(e, Error)), None)
        m.error = failed.error if failed is not None else lane_error.message if lane_error is not None else None
        m.ok = m.error is None and bool(m.turns)
    return m


def stopped_at(lanes: Sequence[LiveLane]) -> float | None:
    """When the race was stopped (race time), if the user stopped any lane before its end."""
    ends = [lane.ended_at for lane in lanes if lane.state == "stopped"]
    return max((end for end in ends if end is not None), default=None)


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def shown(b: Bottleneck) -> list[tuple[str, float, float]]:
    """The parts worth a column: the model's, and any other of :data:`MIN_PART_S` or more."""
    return [(part, s, share) for part, s, share in b.parts if part == "model" or s >= MIN_PART_S]


def _mark(lane: LiveLane) -> str:
    """After a lane's time: … while it runs, ✗ when it failed or was stopped."""
    if lane.error:
        return " ✗"
    return "" if lane.finished else " …"


def baseline(rows: Sequence[Bottleneck]) -> str | None:
    """The lane the speed-ups are measured against, as :func:`tokrace.providers.metrics.loop.bottlenecks` chose it:
    the race's reference lane (a trace as recorded), else of the lanes that finished the one with the slowest
    token rate (none while fewer than two have)."""
    return next((b.against for b in rows if b.against is not None), None)


SCALES: Final[str] = " (its time to first token and its token rate alike)"
"""What the what-if scales: all of the model's time, so a raced tier with another TTFT takes longer or less."""


def _took(b: Bottleneck) -> str:
    return duration(b.what_if.e2e_s, 1)


def _saved(b: Bottleneck) -> str:
    return percent(b.what_if.sooner_pct / 100)



class BottleneckView(VerticalScroll):
    """Shown in place of the lanes (key ``b``); the screen calls :meth:`sample` a few times a second."""

    DEFAULT_CSS = """
    BottleneckView { height: 1fr; padding: 0 1; border-top: hkey $panel-lighten-2; }
    BottleneckView > Static { height: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.factor = WHAT_IF_FACTOR
        """The N of the what-if."""
        self.body = Static("", markup=False)
        self.final = False
        """The figures are the race's final ones (from the events), not the live ones so far."""
        self.rows: list[Bottleneck] = []
        self.reference: str | None = None
        """The lane every speed-up is against when the race names one (a trace as recorded)."""
        self._loops_of: object = None
        self._loops: list[LoopMetrics] = []

    def compose(self) -> ComposeResult:
        yield self.body

    def step(self, step: int) -> float:
        """A faster (``step`` > 0) or slower model in the what-if; returns the new N."""
        self.factor = step_factor(self.factor, step)
        return self.factor

    def sample(self, runner: RaceRunner, now: float) -> None:
        """Recompute from the race: the loop so far while it runs, the final figures once it is over."""
        race, live = runner.race, runner.live
        lanes = live.lanes
        self.final = race is not None and live.finished and not runner.running
        if race is not None and self.final:
            if self._loops_of is not race:  # once per race: the events no longer change
                self._loops_of = race
                self._loops = [final_loop(run.events, run.tier) for run in race.lanes]
            loops = self._loops
        else:
            loops = [lane.loop_so_far(now) for lane in lanes]
        self.reference = reference_name([lane.tier for lane in lanes])
        rows = bottlenecks([(lane.tier.name, m) for lane, m in zip(lanes, loops, strict=True)], self.factor,
                           self.reference)
        if not self.final:  # against whichever lane happens to have finished, a speed-up would mislead
            rows = [dataclasses.replace(b, e2e_speedup=None, token_speedup=None, against=None) for b in rows]
        self.rows = rows
        noun = "loop" if any(lane.loop for lane in lanes) or runner.loop_name else "turn"
        self.body.update(self._view(lanes, noun, runner.loop_name, now, started=race is not None),
                         layout=False)

    def _view(self, lanes: Sequence[LiveLane], noun: str, loop_name: str | None, now: float,
              started: bool) -> RenderableType:
        factor = f"{self.factor:g}×"
        what = loop_name if loop_name else "one prompt (a loop of one turn)"
        stop = stopped_at(lanes) if self.final else None
        when = (f"stopped at {duration(stop, 1)}" if stop is not None else "final" if self.final
                else f"so far, {duration(now, 1)} in")
        title = join_runs([("where the time goes", "bold"), (f" — {what} · ", ""), (when, "bold"),
                           (f" · what if the model were {factor} faster (", ""), ("< >", "bold"),
                           (" change N)", "")])
        if not started:
            return Group(title, Text("\nthe race has not started yet", style="dim"))
        width = self.app.size.width
        table: RenderableType = (self._table(lanes, noun, factor, width) if width >= NARROW
                                 else self._paragraphs(lanes, factor))
        return Group(title, Text(""), table, self._sentences(lanes, noun, factor))

    def _table(self, lanes: Sequence[LiveLane], noun: str, factor: str, width: int) -> Table:
        from tokrace.providers.export.tables import what_if_cell  # (bench's tables: not before the first frame)

        rows = self.rows
        present = sorted({part for b in rows for part, _, _ in shown(b)}, key=PART_ORDER.index)
        base = baseline(rows) if self.final else None
        # Left-aligned, each cell carrying its own gap in its own style: a run of text never starts with a space
        # (SVG viewers drop it, shifting the run left).
        table = Table(box=None, pad_edge=False, header_style="bold", padding=0, expand=False)
        bars = width >= WIDE
        names_of = part_names(lanes)
        headers = ["lane", noun, *(["split"] if bars else []), *(names_of.get(p, p) for p in present), "Amdahl",
                   f"model {factor} faster",
                   f"vs {base}: e2e | tok/s" if base else "speed-up e2e | tok/s"]
        for header in headers:
            table.add_column(Text(header + GAP), no_wrap=True)  # Text: a tier's name in it is not markup
        names = max((len(b.name) for b in rows), default=0)
        for index, (b, lane) in enumerate(zip(rows, lanes, strict=True)):
            parts = {part: (s, share) for part, s, share in shown(b)}
            cells: list[str | Text] = [self._lane_name(b.name.ljust(names), index),
                                       f"{duration(b.e2e_s, 1)}{_mark(lane)}"]
            if bars:
                cells.append(self._bar(b))
            cells += [f"{duration(parts[p][0], 1)} {percent(parts[p][1])}" if p in parts else "—" for p in present]
            cells += [_x(b.amdahl_max_speedup), what_if_cell(b.what_if),
                      f"{_x(b.e2e_speedup)} | {_x(b.token_speedup)}"]
            table.add_row(*(cell if isinstance(cell, Text) else cell + GAP for cell in cells),
                          style="" if b.ok or not lane.finished else "dim")
        return table

    def _lane_name(self, name: str, index: int) -> Text:
        """A lane's name in its colour, with the gap after it in the same style."""
        return Text(name + GAP, style=palette(self.app).lane(index) + Style(bold=True))

    def _paragraphs(self, lanes: Sequence[LiveLane], factor: str) -> Text:
        """The same figures for a narrow terminal: a paragraph per lane, its name first."""
        from tokrace.providers.export.tables import what_if_cell

        text = Text()
        base = baseline(self.rows) if self.final else None
        for index, (b, lane) in enumerate(zip(self.rows, lanes, strict=True)):
            names_of = part_names(lanes)
            parts = " · ".join(f"{names_of.get(part, part)} {duration(s, 1)} {percent(share)}"
                               for part, s, share in shown(b))
            vs = f" · vs {base}: {_x(b.e2e_speedup)} e2e, {_x(b.token_speedup)} tok/s" if base else ""
            if index:
                text.append("\n")
            text.append_text(self._lane_name(b.name, index)[:-1])
            text.append(f"{duration(b.e2e_s, 1)}{_mark(lane)}: {parts} · Amdahl {_x(b.amdahl_max_speedup)} · a model "
                        f"{factor} faster: {what_if_cell(b.what_if)}{vs}",
                        style="" if b.ok or not lane.finished else "dim")
        return text

    def _bar(self, b: Bottleneck) -> Text:
        """The lane's loop as one bar split by part, each part as wide as its share (at least a cell); the gap
        after it in its last colour."""
        pal = palette(self.app)
        bar = Text()
        left = BAR_CELLS
        parts = shown(b)
        for i, (part, _, share) in enumerate(parts):
            cells = left if i == len(parts) - 1 else min(left, max(1, round(share * BAR_CELLS)))
            if cells <= 0:
                continue
            left -= cells
            bar.append(("━" if part in THIN_KINDS else "█") * cells, style=pal.segment(part))
        return bar.append(GAP, style=pal.segment(parts[-1][0]) if parts else "")

    def _sentences(self, lanes: Sequence[LiveLane], noun: str, factor: str) -> Text:
        """What the table means, a line per lane, then the gap between token speed and end-to-end speed."""
        text = Text()
        for b, lane in zip(self.rows, lanes, strict=True):
            if self.final and b.ok:
                what_if = (f"a model {factor} faster{SCALES} would finish this {noun} in {_took(b)} "
                           f"({_saved(b)} sooner)")
            elif self.final:  # stopped or failed: the figures are of the part that ran, not of a whole loop
                ended = "was stopped" if lane.state == "stopped" else "failed"
                what_if = (f"until it {ended}, a model {factor} faster{SCALES} would have taken {_took(b)} "
                           f"({_saved(b)} less)")
            else:
                what_if = (f"so far, a model {factor} faster{SCALES} would have taken {_took(b)} "
                           f"({_saved(b)} less)")
            text.append("\n")
            text.append(b.name, style="bold")
            so_far = "" if self.final and b.ok else " so far"
            if b.amdahl_max_speedup is None:  # said once: a share of 100 % and an unbounded speed-up are one fact
                share = f"the model is all of the {noun}{so_far}: nothing else holds it up"
            else:
                could = "could make it" if not so_far else "could have made it"
                share = (f"the model is {percent(b.model_share)} of the {noun}{so_far}; no model, however fast, "
                         f"{could} more than {b.amdahl_max_speedup:.2f}× faster")
            text.append(f": {share}; {what_if}.")
        gap = self._gap(noun)
        if gap:
            text.append("\n\n")
            text.append(gap, style="bold")
        base = baseline(self.rows) if self.final else None
        if base is not None:
            why = "the trace as recorded" if base == self.reference else "the finished lane with the slowest token rate"
            against = f"speed-ups against {base}, {why}"
        elif self.reference is not None:
            against = f"speed-ups once the race is over, against {self.reference}, the trace as recorded"
        else:
            against = "speed-ups once two lanes have finished, against the slower-streaming one"
        if any(lane.path for lane in lanes):  # a trace's lane: its parts are tokrace traces' breakdown
            bound = ("measured, the trace re-timed on an instant model" if self.final else
                     "so far, the time so far ÷ that time less the model's (measured once the trace ends)")
            text.append("\n\nparts: along the trace's critical path (the steps that set its wall time), as tokrace "
                        "traces counts them; work beside it (a parallel sub-agent) is not counted; Amdahl: "
                        f"{bound}; {against}", style="dim")
            return text
        text.append("\n\nmodel: all time waiting on the model API (to the first token, thinking, streaming); "
                    f"Amdahl: the most any faster model could give; {against}", style="dim")
        return text

    def _gap(self, noun: str) -> str | None:
        """The fastest lane's token speed-up against its end-to-end speed-up, once both are known."""
        rows = [b for b in self.rows if b.token_speedup is not None and b.e2e_speedup]
        base = baseline(self.rows)
        best = max(rows, key=lambda b: b.token_speedup or 0.0, default=None)
        if best is None or base is None or best.name == base:
            return None
        return (f"{best.name} streams {best.token_speedup:.1f}× faster than {base} but finishes "
                f"the {noun} {finishes(best.e2e_speedup or 0.0)}.")
