"""The finish line: when a race ends, a podium over the lanes with the ranking, each lane's time and the speed-up
in large type, for a room to read from the back. Any key or a click puts the race back.

Every figure comes from :func:`tokrace.providers.runs.session.lane_metrics` over the race's events, the same definitions
``tokrace bench`` prints: end to end is ``e2e_s`` (the whole loop in a scenario), "in tokens" is the ratio of
``decode_tok_s``. A speed-up is stated only between lanes that finished; a lane that failed or was stopped is
ranked without a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Digits, Static

from tokrace.providers.model.units import duration
from tokrace.providers.race.race import LaneRun
from tokrace.providers.runs.session import lane_metrics

from ..widgets.big_digits import ROWS, BigDigits
from ..widgets.palette import palette


@dataclass(slots=True)
class Place:
    """One lane on the podium: its rank among the finishers (``None`` when it did not finish) and its time."""

    index: int
    name: str
    rank: int | None
    e2e_s: float | None
    note: str = ""
    """Why a lane has no time: "failed" or "stopped"."""


@dataclass(slots=True)
class Finish:
    """What the podium shows: the places, and the winner's speed-up against the slowest finisher (or the race's
    reference lane)."""

    places: list[Place] = field(default_factory=list)
    winner: str | None = None
    against: str | None = None
    e2e_x: float | None = None
    """The slowest finisher's e2e ÷ the winner's."""
    tokens_x: float | None = None
    """The winner's decode tok/s ÷ the slowest finisher's."""
    reference: bool = False
    """``against`` is the race's reference lane (a trace as recorded), not the slowest."""
    loop: bool = False


def finish(lanes: Sequence[LaneRun], loop: bool = False) -> Finish:
    """The podium of a finished race, from its lanes' events, measured as bench measures them."""
    metrics = [lane_metrics(lane, loop=loop) for lane in lanes]
    done = sorted((m.e2e_s, i) for i, m in enumerate(metrics) if m.ok and m.e2e_s is not None)
    rank = {index: n + 1 for n, (_, index) in enumerate(done)}
    places = []
    for i, (lane, m) in enumerate(zip(lanes, metrics, strict=True)):
        stopped = any(getattr(e, "error", None) == "stopped" for e in lane.events)
        note = "" if i in rank else ("stopped" if stopped else "failed")
        places.append(Place(i, lane.tier.name, rank.get(i), m.e2e_s if i in rank else None, note))
    places.sort(key=lambda p: (p.rank is None, p.rank or 0, p.index))
    out = Finish(places=places, loop=loop)
    if not done:
        return out
    # Against the race's reference lane (a trace as recorded) when it finished behind the winner, else the slowest.
    against = next((index for _, index in done[1:] if lanes[index].tier.reference), done[-1][1])
    first, last = metrics[done[0][1]], metrics[against]
    out.winner = lanes[done[0][1]].tier.name
    out.reference = lanes[against].tier.reference
    if len(done) > 1:
        out.against = lanes[against].tier.name
        if first.e2e_s and last.e2e_s:
            out.e2e_x = last.e2e_s / first.e2e_s
        if first.decode_tok_s and last.decode_tok_s:
            out.tokens_x = first.decode_tok_s / last.decode_tok_s
    return out


def times(x: float) -> str:
    """A speed-up as the big digits show it: whole above 10 ("12x"), else one decimal ("1.6x")."""
    return f"{x:.0f}x" if x >= 9.95 else f"{x:.1f}x"


def e2e_words(f: Finish) -> str:
    whole = "the whole loop" if f.loop else "end to end"
    if f.e2e_x is None or round(f.e2e_x, 1) <= 1.0:
        return f"no faster {whole}"
    return f"faster {whole}"


def tokens_words(f: Finish) -> str:
    if f.tokens_x is None:
        return ""
    return "in tokens" if round(f.tokens_x, 1) >= 1.0 else "the token rate"


def rows_needed(f: Finish, big: bool, short: bool, width: int) -> int:
    """The rows the finish line takes on a terminal ``width`` wide: the border, the headline, each speed-up in
    five-row (``big``) or three-row digits, the ranking and the footnote, with the blank rows between them (none
    around the large type on a ``short`` terminal, as podium.tcss lays it out)."""
    gap = 0 if short else 1
    lines = (f.e2e_x is not None) + (f.tokens_x is not None)
    room = max(int(width * BOX_SHARE) - 6, 1)  # the box's border and padding
    notes = sum(-(-len(line) // room) for line in footnote(f).split("\n"))
    return 2 + (gap + 1) + lines * (gap + (ROWS if big else 3)) + (1 + len(f.places)) + (1 + notes + gap)


BOX_SHARE: Final[float] = 0.96
"""The finish line's box takes at most this share of the terminal's width and height (podium.tcss)."""


def footnote(f: Finish) -> str:
    """What the speed-ups are measured against, and how to go on."""
    if f.against is None:
        return "any key continues"
    why = "the trace as recorded" if f.reference else "the slowest to finish"
    return f"{f.winner} against {f.against}, {why}\nmeasured as tokrace bench measures · any key continues"


class PodiumScreen(ModalScreen[None]):
    """The finish line over the race; any key or click dismisses it. Wherever they fit (a 100×30 projector and
    up, with three lanes) the speed-ups are drawn in five-row block type, else in Textual's three-row digits."""

    CSS_PATH = "podium.tcss"
    VERTICAL_BREAKPOINTS = [(0, "-short"), (24, "-tall")]  # noqa: RUF012 (Textual types it as an instance attribute)

    def __init__(self, result: Finish) -> None:
        super().__init__()
        self.result = result

    def compose(self) -> ComposeResult:
        f = self.result
        with Vertical(id="podium"):
            yield Static(self._headline(), id="podium-winner")
            if f.e2e_x is not None:
                with Horizontal(classes="podium-line"):
                    yield Digits(times(f.e2e_x), id="podium-e2e", classes="podium-digits")
                    yield BigDigits(times(f.e2e_x), classes="podium-big")
                    yield Static(e2e_words(f), classes="podium-words")
            if f.tokens_x is not None:
                with Horizontal(classes="podium-line"):
                    yield Digits(times(f.tokens_x), id="podium-tokens", classes="podium-digits")
                    yield BigDigits(times(f.tokens_x), classes="podium-big")
                    yield Static(tokens_words(f), classes="podium-words")
            yield Static(id="podium-ranking")
            yield Static(self._footnote(), id="podium-note")

    def on_mount(self) -> None:
        self.query_one("#podium").border_title = "finish"
        self.query_one("#podium-ranking", Static).update(self._ranking())
        self._fit(self.app.size.width, self.app.size.height)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        """The large type wherever the whole finish line still fits with it."""
        fits = rows_needed(self.result, big=True, short=height < 24, width=width) <= int(height * BOX_SHARE)
        self.set_class(fits, "-big")

    def _headline(self) -> Text:
        f = self.result
        if f.winner is None:
            return Text("no lane finished", style="bold")
        return Text.assemble((f.winner, "bold"), (" wins", "bold"))

    def _ranking(self) -> Table:
        pal = palette(self.app)
        table = Table(show_header=False, show_edge=False, box=None, pad_edge=False, padding=(0, 2, 0, 0))
        table.add_column(justify="right", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(justify="right", no_wrap=True)
        for place in self.result.places:
            style = pal.lane(place.index) + Style(bold=True)
            rank = f"{place.rank}" if place.rank is not None else "✗"
            time = duration(place.e2e_s) if place.e2e_s is not None else place.note
            table.add_row(Text(rank, style="bold"), Text(place.name, style=style),
                          Text(time, style="bold" if place.e2e_s is not None else "dim"))
        return table

    def _footnote(self) -> Text:
        return Text(footnote(self.result), style="dim")

    def on_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        self.dismiss()

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.dismiss()
