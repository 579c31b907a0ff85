"""The load screen (``tokrace --concurrency N``): one lane per tier under load, sampled a few times a second, and
once the load is over the figures ``tokrace bench --concurrency`` prints, cell for cell."""

from __future__ import annotations

from typing import ClassVar, Final

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from tokrace.providers.export.load_export import load_table
from tokrace.providers.runs.live_load import LoadRunner
from tokrace.providers.runs.load import TierLoad

from ..widgets.gauge import nice_scale
from ..widgets.load_lane import LoadLane, lane_text, plural
from ..widgets.palette import palette

SAMPLE_HZ: Final[float] = 4.0
"""How often the lanes are redrawn: the figures move with whole requests, not tokens."""
SUMMARY_COLUMNS: Final[tuple[str, ...]] = ("tier", "streams", "requests", "tok/s", "TTFT p50", "TTFT p99",
                                           "decode p50", "result")
"""The columns of bench's load table the screen shows under the lanes (the same cells)."""


class LoadScreen(Screen[None]):
    """Every tier under load, one lane each."""

    CSS_PATH = "load.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit")]

    def __init__(self, runner: LoadRunner, *, animate: bool = True) -> None:
        super().__init__()
        self.runner = runner
        self.animated = animate
        self._shown_result = False

    def compose(self) -> ComposeResult:
        yield Static(id="load-title")
        with VerticalScroll(id="load-body"):
            for i in range(len(self.runner.tiers)):
                yield LoadLane(i, id=f"load-lane-{i}")
            yield Static(id="load-results")
        yield Footer()

    def on_mount(self) -> None:
        self.sample()
        if self.animated:
            self.set_interval(1.0 / SAMPLE_HZ, self.sample)

    def _title(self) -> Text:
        plan = self.runner.plan
        levels = ", ".join(str(n) for n in plan.concurrency)
        end = (f"{plan.duration_s:g} s" if plan.duration_s is not None else
               f"{plan.requests} requests" if plan.requests is not None else "4 requests per stream")
        now, live = self.runner.live.level_streams, self.runner.live
        where = (f" — level {live.levels_done + 1} of {len(plan.concurrency)}: {plural(now, 'stream')}"
                 if now and len(plan.concurrency) > 1 and not self.runner.finished else "")
        text = Text("tokrace under load ", style="bold")
        text.append(f"{levels} streams per tier, {end} per level{where}", style="dim")
        if self.runner.problem is not None:
            text.append(f"\n{self.runner.problem}", style="red")
        return text

    def _finals(self) -> list[TierLoad | None]:
        """Each lane's figures of the level just finished, once the whole load is over."""
        result = self.runner.result
        if result is None:
            return [None] * len(self.runner.tiers)
        last = result.points[-len(result.tiers):] if result.points else []
        return [*last] if last else [None] * len(self.runner.tiers)

    def sample(self) -> None:
        """Redraw every lane from the live state (or, once over, from the load's own figures)."""
        self.query_one("#load-title", Static).update(self._title())
        now = self.runner.clock.now()
        finals = self._finals()
        rates = [(f.delivered_tok_s if f is not None else lane.delivered_tok_s(now)) or 0.0
                 for lane, f in zip(self.runner.live.lanes, finals, strict=True)]
        scale = nice_scale(max(rates, default=0.0) * 1.1)
        colours = palette(self.app)
        for i, (lane, final) in enumerate(zip(self.runner.live.lanes, finals, strict=True)):
            widget = self.query_one(f"#load-lane-{i}", LoadLane)
            width = max(widget.content_size.width, 30)
            widget.show(lane_text(lane, i, now, scale, width, colours, final))
        if self.runner.result is not None and not self._shown_result:
            self._shown_result = True
            self.query_one("#load-results", Static).update(self._results())

    def _results(self) -> Text:
        """Bench's load table, in the columns that fit a screen: the very cells bench prints."""
        assert self.runner.result is not None
        plain = load_table(self.runner.result)
        keep = [i for i, c in enumerate(plain.columns) if c.name in SUMMARY_COLUMNS]
        widths = [max(len(plain.columns[i].name), *(len(r.cells[i]) for r in plain.rows)) for i in keep]
        text = Text("as tokrace bench --concurrency prints it\n", style="bold", no_wrap=True, overflow="ellipsis")

        def cells(values: list[str]) -> str:
            return "  ".join((v.rjust if plain.columns[i].right else v.ljust)(widths[n])
                             for n, (i, v) in enumerate(zip(keep, values, strict=True))).rstrip()

        text.append(cells([plain.columns[i].name for i in keep]), style="dim")
        for row in plain.rows:
            text.append("\n" + cells([row.cells[i] for i in keep]), style="red" if row.failed else "")
        return text
