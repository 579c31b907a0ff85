"""Help: the keys of the race screen (from its own bindings, so never out of date), what the colours and marks
mean, and where the numbers come from."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tokrace.providers.model.kinds import MEANINGS, THIN_KINDS

from ..widgets.palette import SEGMENT_KINDS, palette


class HelpScreen(ModalScreen[None]):
    """Keys, legend and provenance, over the race."""

    CSS_PATH = "help.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close"),
        Binding("space", "page_down", "Page down", show=False),
    ]

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        with Vertical(id="help"):
            yield Static(Text("tokrace — keys and legend", style="bold"), classes="help-title")
            with VerticalScroll(id="help-body"):
                yield Static(self._keys_table(), classes="help-keys")
                yield Static(id="legend", classes="help-legend")
                yield Static(self._notes(), classes="help-notes")
            yield Static(Text("↑ ↓ PgUp PgDn Home End, space or the mouse wheel scroll · escape closes",
                              style="dim"), classes="help-close")

    def on_mount(self) -> None:
        self.query_one("#legend", Static).update(self._legend())
        self.query_one("#help-body", VerticalScroll).focus()  # the arrows and page keys scroll it

    def action_page_down(self) -> None:
        self.query_one("#help-body", VerticalScroll).scroll_page_down()

    def _keys_table(self) -> Table:
        table = Table(show_header=False, show_edge=False, box=None, pad_edge=False)
        table.add_column(style="bold", no_wrap=True, min_width=14)
        table.add_column()
        for key, description in self.keys:
            table.add_row(key, description)
        table.add_row("ctrl+p", "command palette: every action by name, and the theme")
        table.add_row("escape", "leave the prompt bar; close this help")
        return table

    def _legend(self) -> Table:
        pal = palette(self.app)
        table = Table(show_header=False, show_edge=False, box=None, pad_edge=False, title="timeline",
                      title_justify="left", title_style="bold")
        table.add_column(no_wrap=True, min_width=14)
        table.add_column()
        for kind in SEGMENT_KINDS:
            glyph = "━━━━" if kind in THIN_KINDS else "████"
            table.add_row(Text(f"{glyph} {kind}", style=pal.segment(kind)), MEANINGS[kind])
        return table

    def _notes(self) -> Text:
        return Text.from_markup(
            "\n[bold]numbers[/]\n"
            "tokens: plain = the provider's count (usage, or per-piece counts while streaming); "
            "≈ = counted by tiktoken; ~ = counted in chunks.\n"
            "gauge: tok/s over the last second, on one scale for all lanes; once a lane ends, its average "
            "decode rate. The sparkline shows the rate every quarter second.\n"
            "TTFT and every time are measured from the moment the request starts, stamped when the bytes are "
            "read. Press d on a lane for every metric, its definition and its source.\n"
            "The summary compares each lane with the slowest: tokens = decode speed, turn (loop, in a scenario) = "
            "end to end. On the timeline, tool calls that run at the same time get a row of their own (└ parallel). "
            "A theme may draw lanes thicker (projector: two rows each) while the timeline fits in a quarter of the "
            "terminal's height; on a shorter terminal (80×24) each lane takes one row.\n"
            "\n[bold]finish line[/]\n"
            "When a race ends, the winner's speed-up over the slowest finisher, end to end and in tokens (the "
            "figures of tokrace bench), and every lane's rank and time. Any key goes back to the race "
            "(--no-podium leaves it out). A replay that is sped up, stepped or has its idle pauses capped says so "
            "on every lane and in the summary; its figures stay the recording's.\n"
            "\n[bold]bottlenecks[/] (b)\n"
            "Where each lane's time goes, in place of the lanes: the model (all time waiting on the model API: to "
            "the first token, thinking, streaming), tools, people and waits, in seconds and shares; the Amdahl "
            "bound (the most any faster model could give); what a model N× faster would do (< and > change N); "
            "the end-to-end speed-up next to the token speed-up. Live while racing, final at the end. A replayed "
            "agent trace's parts follow its critical path and its bound is measured, as tokrace traces gives them.\n"
            "\n[bold]voice lens[/] (v)\n"
            "[underline]underlined[/] = already spoken; [reverse]a reversed cell[/] = the playhead; [dim]dim[/] = a "
            "sentence still arriving, not speakable yet. A voice starts at the first complete sentence (TTFS) plus "
            "the TTS delay; each time it catches up with the text it falls silent: a stall, drawn on the timeline. "
            "[ and ] change the speaking rate. Press it again to go back to the text."
        )
