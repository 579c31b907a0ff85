"""A lane's details: every metric of DESIGN §6 with its value, where the number came from, and its definition.

The figures are computed from the lane's events by ``providers.metrics`` (the same code as ``tokrace bench``),
one turn at a time; while the lane still runs they are the figures so far and refresh each second.
"""

from __future__ import annotations

from typing import ClassVar, Final

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from providers.base import TierSpec
from providers.events import Event
from providers.live import LiveLane
from providers.loop import WHAT_IF_FACTOR, LoopMetrics, is_loop_end, loop_metrics
from providers.metrics import DEFINITIONS, TurnMetrics, split_turns, turn_metrics

TOKEN_SOURCES: Final[dict[str, str]] = {
    "usage": "the provider's usage event (exact)",
    "tokenizer": "tiktoken on the streamed text (≈)",
    "chunks": "counted chunks: no usage, no tokenizer (~)",
}


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f} s"


def token_source(m: TurnMetrics) -> str:
    if m.tokens_source == "tokenizer" and m.encoding:
        return f"tiktoken {m.encoding} on the streamed text (≈)"
    return TOKEN_SOURCES.get(m.tokens_source, m.tokens_source)


def metric_rows(m: TurnMetrics, tier: TierSpec) -> list[tuple[str, str, str]]:
    """(metric, value, where it came from) for every metric of ``DEFINITIONS`` that ``m`` has, in its order:
    a turn's, plus a loop's own when ``m`` is a whole loop."""
    tokens = token_source(m)
    has_connect = any(s.kind == "connect" for s in m.segments)
    price = tier.price
    if price is None or price.output is None:
        cost_from = "no price for this tier"
    else:
        cost_from = f"usage × ${price.output:g}/M out" + (f", ${price.input:g}/M in" if price.input is not None else "")
    itl = "—" if m.itl_ms is None else "/".join(f"{v:.1f}" for v in m.itl_ms.values()) + " ms"
    values: dict[str, tuple[str, str]] = {
        "connect_s": (_s(m.connect_s), "connect segment (HTTP trace)" if has_connect
                      else "no connect event: reused connection or not reported"),
        "ttfb_s": (_s(m.ttfb_s), "headers event, stamped when read"),
        "ttft_s": (_s(m.ttft_s), "first delta with text, stamped when read"),
        "ttfa_s": (_s(m.ttfa_s), "first content delta"),
        "ttfs_s": (_s(m.ttfs_s), "content deltas: the first sentence end"),
        "e2e_s": (_s(m.e2e_s), "done or error event" if m.ok or m.error else "last event so far"),
        "output_tokens": (f"{m.output_tokens:,}", tokens),
        "decode_tok_s": ("—" if m.decode_tok_s is None else f"{m.decode_tok_s:,.1f}",
                         f"tokens from {m.tokens_source} ÷ delta stamps"),
        "e2e_tok_s": ("—" if m.e2e_tok_s is None else f"{m.e2e_tok_s:,.1f}", f"tokens from {m.tokens_source} ÷ e2e"),
        "itl_ms": (itl, f"p50/p90/p99/max of the gaps between {m.token_events} token events"),
        "tokens_per_event": ("—" if m.tokens_per_event is None else f"{m.tokens_per_event:.2f}",
                             f"tokens from {m.tokens_source} ÷ {m.token_events} events"),
        "stalls": (str(m.stalls), "gaps between delta stamps"),
        "cost_usd": ("—" if m.cost_usd is None else f"${m.cost_usd:.6f}", cost_from),
    }
    if isinstance(m, LoopMetrics):
        values.update(_loop_values(m))
    return [(name, *values[name]) for name in DEFINITIONS if name in values]


def _loop_values(m: LoopMetrics) -> dict[str, tuple[str, str]]:
    what_if = m.what_if(WHAT_IF_FACTOR)
    return {
        "turns": (str(len(m.turns)), "request events (← → shows each turn)"),
        "breakdown": (" · ".join(f"{kind} {seconds:.2f}" for kind, seconds in m.breakdown.items()) + " s",
                      "the loop's segments: turns, tools, people, waits"),
        "model_share": ("—" if m.model_share is None else f"{100 * m.model_share:.1f} %",
                        f"{m.model_s:.2f} s of wait, think and model ÷ e2e"),
        "amdahl_max_speedup": ("—" if m.amdahl_max_speedup is None else f"{m.amdahl_max_speedup:.2f}×",
                               "e2e and the model time"),
        "what_if": (f"{what_if.e2e_s:.2f} s", f"model {WHAT_IF_FACTOR:g}× faster: {what_if.sooner_pct:.0f} % sooner"),
    }


WIDE_DETAILS: Final[int] = 110
"""From this width the definition has a column of its own; narrower, it goes under the source, dimmed."""


def details_table(m: TurnMetrics, tier: TierSpec, width: int = WIDE_DETAILS) -> Table:
    """Every metric of ``m``: value, source and definition."""
    table = Table(expand=True, show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("metric", no_wrap=True)
    table.add_column("value", justify="right", max_width=24)
    if width >= WIDE_DETAILS:
        table.add_column("from", ratio=2)
        table.add_column("definition", ratio=3, style="dim")
        for name, value, source in metric_rows(m, tier):
            table.add_row(name, value, source, DEFINITIONS[name])
    else:
        table.add_column("from · definition", ratio=1)
        for name, value, source in metric_rows(m, tier):
            table.add_row(name, value, Text.assemble(source, "\n", (DEFINITIONS[name], "dim")))
    return table


class DetailsScreen(ModalScreen[None]):
    """Every metric of one lane, a turn at a time."""

    CSS_PATH = "details.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,d,q", "dismiss", "Close"),
        Binding("left", "turn(-1)", "Previous turn"),
        Binding("right", "turn(1)", "Next turn"),
    ]

    def __init__(self, index: int, lane: LiveLane, events: list[Event]) -> None:
        super().__init__()
        self.index = index
        self.lane = lane
        self.events = events
        self.turn = 0
        self.title_bar = Static(classes="details-title")
        self.body = Static(classes="details-body")
        self.problem = Static(classes="details-error")

    def compose(self) -> ComposeResult:
        with Vertical(id="details", classes=f"lane-{self.index % 6}"):
            yield self.title_bar
            yield self.problem
            with VerticalScroll():
                yield self.body
        yield Footer()

    def on_mount(self) -> None:
        self.show()
        if not self.lane.finished:
            self.set_interval(1.0, self._refresh_while_running)

    def _refresh_while_running(self) -> None:
        self.show()

    def on_resize(self) -> None:
        self.show()

    def pages(self) -> list[list[Event] | None]:
        """What ← → step through: the whole loop first (``None``) when there are several turns, then each turn."""
        turns: list[list[Event] | None] = list(split_turns(self.events))
        if len(turns) > 1 or any(is_loop_end(e) for e in self.events):
            turns.insert(0, None)
        return turns

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "turn":
            return len(self.pages()) > 1
        return True

    def action_turn(self, delta: int) -> None:
        count = len(self.pages())
        if count:
            self.turn = (self.turn + delta) % count
            self.show()

    def show(self) -> None:
        tier = self.lane.tier
        pages = self.pages()
        page = pages[min(self.turn, len(pages) - 1)] if pages else None
        turn_pages = sum(1 for p in pages if p is not None)
        title = Text()
        title.append(tier.name, style="bold")
        title.append(f"  {tier.model or '(no model)'} · {tier.provider}")
        if tier.service_tier:
            title.append(f" · service tier {tier.service_tier}")
        if tier.base_url:
            title.append(f" · {tier.base_url}")
        if len(pages) > 1:
            number = min(self.turn, len(pages) - 1) + (0 if pages[0] is None else 1)
            where = "whole loop" if page is None else f"turn {number}"
            title.append(f"   {where} of {turn_pages} turns (← →)", style="bold")
        if not self.lane.finished:
            title.append("   still running: the figures so far", style="italic")
        self.title_bar.update(title)
        if not pages:
            self.body.update("No events yet: the lane has not started.")
            self.problem.display = False
            return
        if page is None:
            m: TurnMetrics = loop_metrics(self.events, tier.price, tier.model)
        else:
            m = turn_metrics(page, tier.price, tier.model)
        self.problem.display = bool(m.error) and self.lane.finished
        if m.error:
            self.problem.update(f"✗ {m.error}")
        self.body.update(details_table(m, tier, self.size.width))
