"""A lane's details: every metric of docs/design.md §6 with its value, where the number came from, and its definition;
for
a turn over HTTP, also what its response said about itself (the service tier asked for and got, the request id,
the retries, how the wait before the first token splits) and the provider's own timing beside tokrace's numbers.

The figures are computed from the lane's events by ``tokrace.providers.metrics.turn`` (the same code as ``tokrace
bench``),
one turn at a time; while the lane still runs they are the figures so far and refresh each second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final, TypeGuard

from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.color import Color, ColorParseError
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from tokrace.providers.metrics.loop import WHAT_IF_FACTOR, LoopMetrics, loop_metrics
from tokrace.providers.metrics.turn import (
    DEFINITIONS,
    OWN_EXTRAS,
    SegmentSpan,
    TurnMetrics,
    split_turns,
    turn_metrics,
)
from tokrace.providers.model.events import Event, Headers, Request, Segment, is_loop_end
from tokrace.providers.model.masking import mask_url
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.model.units import duration, percent
from tokrace.providers.race.live import LiveLane

from ..widgets.lane import worth_saying

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


def _itl(itl: dict[str, float] | None) -> str:
    """``itl_ms`` as the details view shows it: the mean, then p50/p90/p99/max when the gaps were measured."""
    if itl is None:
        return "—"
    parts = [f"mean {itl['mean']:.1f}"] if "mean" in itl else []
    if "p50" in itl:
        parts.append("/".join(f"{itl[q]:.1f}" for q in ("p50", "p90", "p99", "max")))
    return " · ".join(parts) + " ms"


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
    itl = _itl(m.itl_ms)
    connect_label = next((f": {s.label}" for s in m.segments if s.kind == "connect" and s.label), "")
    if m.retries:  # the turn's start is the first attempt's: the failed attempts and their waits come first
        connect_label += f", after {m.retries} failed attempt{'s' if m.retries > 1 else ''} (see retries)"
    # A synthetic lane (live or replayed) opens no socket: its events are stamped at its profile's planned moments.
    planned = tier.provider == "synthetic" or tier.options.get("recorded_provider") == "synthetic"
    stamped = "stamped at the profile's planned moment" if planned else "stamped when read"
    if planned:
        connect = ("—", "not applicable: a synthetic lane opens no socket")
    else:
        connect = (_s(m.connect_s), f"connect segment (HTTP trace){connect_label}" if has_connect
                   else "no connect event: reused connection or not reported")
    values: dict[str, tuple[str, str]] = {
        "connect_s": connect,
        "ttfb_s": (_s(m.ttfb_s), f"headers event, {stamped}"),
        "ttft_s": (_s(m.ttft_s), f"first delta with text, {stamped}"),
        "ttfa_s": (_s(m.ttfa_s), "first content delta"),
        "ttfs_s": (_s(m.ttfs_s), "content deltas: the first sentence end"),
        "e2e_s": (_s(m.e2e_s), "done or error event" if m.ok or m.error else "last event so far"),
        "output_tokens": (f"{m.output_tokens:,}", tokens),
        "decode_tok_s": ("—" if m.decode_tok_s is None else f"{m.decode_tok_s:,.1f}",
                         f"tokens from {m.tokens_source} ÷ delta stamps"),
        "e2e_tok_s": ("—" if m.e2e_tok_s is None else f"{m.e2e_tok_s:,.1f}", f"tokens from {m.tokens_source} ÷ e2e"),
        "itl_ms": (itl, f"mean of the first to last token; p50/p90/p99/max of the gaps between {m.token_events} "
                   "token events" if m.reads_paced_ms is None else "mean of the first to last token; the gaps are "
                   f"not measured: tokens came faster than 500 packets/s and were read every {m.reads_paced_ms:g} "
                   "ms (--exact-reads measures them)"),
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
                        f"{m.model_s:.2f} s of pending, think and model ÷ e2e"),
        "amdahl_max_speedup": ("—" if m.amdahl_max_speedup is None else f"{m.amdahl_max_speedup:.2f}×",
                               "e2e and the model time"),
        "what_if": (duration(what_if.e2e_s), f"model {WHAT_IF_FACTOR:g}× faster (its TTFT and token rate alike): "
                                             f"{percent(what_if.sooner_pct / 100)} sooner"),
    }


WIDE_DETAILS: Final[int] = 110
"""From this width the definition has a column of its own; narrower, it goes under the source, dimmed."""


def details_table(m: TurnMetrics, tier: TierSpec, width: int = WIDE_DETAILS) -> Table:
    """Every metric of ``m``: value, source and definition (as plain text: a provider's words are never markup)."""
    table = Table(expand=True, show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("metric", no_wrap=True)
    table.add_column("value", justify="right", max_width=24)
    if width >= WIDE_DETAILS:
        table.add_column("from", ratio=2)
        table.add_column("definition", ratio=3, style="dim")
        for name, value, source in metric_rows(m, tier):
            table.add_row(Text(name), Text(value), Text(source), Text(DEFINITIONS[name]))
    else:
        table.add_column("from · definition", ratio=1)
        for name, value, source in metric_rows(m, tier):
            table.add_row(Text(name), Text(value), Text.assemble(source, "\n", (DEFINITIONS[name], "dim")))
    return table


EXTRA_NAMES: Final[dict[str, str]] = {
    "groq": "Groq x_groq.usage",
    "cerebras": "Cerebras time_info",
    "llamacpp": "llama.cpp timings",
}
"""The providers' own timing objects, by the ``source`` of their extra event."""

_HIDDEN_FIELDS: Final[frozenset[str]] = frozenset({"decode_tok_s", "created"})
"""Fields not listed as they came: the decode rate tokrace derives (shown beside its own), a wall-clock stamp."""


def over_http(events: Sequence[Event]) -> bool:
    """Whether a turn was a request to an HTTP API (live, or recorded from one)."""
    return any(isinstance(e, Request) and e.endpoint.startswith(("http://", "https://")) for e in events)


def wire_rows(m: TurnMetrics, events: Sequence[Event], tier: TierSpec,
              highlight: Style | str = "bold yellow") -> list[tuple[str, Text, Text]]:
    """(item, value, where from or tokrace's figure beside it) for what one turn's response said about itself:
    the service tier asked for and got (``highlight`` when they differ), the request id, the retries, how the wait
    before the first token splits (retries, connect, the server), and each provider's own timing beside
    tokrace's numbers."""
    rows: list[tuple[str, Text, Text]] = []
    asked = tier.service_tier or ""
    reported = m.extras.get("service_tier")
    got = reported.get("got") if isinstance(reported, Mapping) else None
    got = got or next((e.service_tier for e in events if isinstance(e, Headers) and e.service_tier), None)
    if got and worth_saying(asked, got):
        differs = bool(asked) and asked != got
        value = Text.assemble(f"{asked} → " if asked else "", (f"got {got}", highlight if differs else ""))
        note = "asked in the request; got: the tier the response reported"
        rows.append(("service tier", value, Text(note + (" (not the one asked for)" if differs else ""))))
    elif asked:
        rows.append(("service tier", Text(f"{asked} → not reported"), Text("asked in the request; the response "
                                                                          "did not say which tier it used")))
    rid = next((e.request_id for e in events if isinstance(e, Headers) and e.request_id), "")
    rows.append(("request id", Text(rid or "—"), Text("the response's request-id header" if rid else
                                                     "the response sent no request id")))
    retry_spans = [s for s in m.segments if s.kind == "retry"]
    rows.append(("retries", Text(str(m.retries)), Text("; ".join(s.label for s in retry_spans if s.label)
                                                      or "no attempt failed before the stream began")))
    rows.append(_wait_row(m, events, retry_spans))
    for source, data in m.extras.items():
        if source not in OWN_EXTRAS and isinstance(data, Mapping):
            rows += _extra_rows(source, data, m)
    return rows


def _wait_row(m: TurnMetrics, events: Sequence[Event], retry_spans: Sequence[SegmentSpan],
              ) -> tuple[str, Text, Text]:
    """The wait before the first token (or, without one, before the end), split into its parts."""
    until = m.ttft_s if m.ttft_s is not None else m.e2e_s
    connect = next((e for e in events if isinstance(e, Segment) and e.seg == "connect"), None)
    retried = sum(s.end - s.start for s in retry_spans)
    parts = [f"retries {retried:.3f} s"] if retry_spans else []
    if connect is not None:
        how = f" ({connect.label})" if connect.label else ""
        parts.append(f"connect {connect.end - connect.start:.3f} s{how}")
    if until is not None:
        on_wire = (connect.end - m.start) if connect is not None else retried
        server = "the server until the first token" if m.ttft_s is not None else "until the turn ended"
        parts.append(f"{server} {max(until - on_wire, 0.0):.3f} s")
    name = "to first token" if m.ttft_s is not None else "pending (no token)"
    return name, Text(_s(until)), Text(" + ".join(parts) if parts else "no request event")


def _extra_rows(source: str, data: Mapping[str, Any], m: TurnMetrics) -> list[tuple[str, Text, Text]]:
    """A provider's own timing: its decode rate and its time to the first token beside tokrace's, then every
    field as it came."""
    name = EXTRA_NAMES.get(source, source)
    rows: list[tuple[str, Text, Text]] = []
    decode = data.get("decode_tok_s")
    if _number(decode):
        ours = "—" if m.decode_tok_s is None else f"{m.decode_tok_s:,.1f} tok/s"
        rows.append((f"{name}: decode", Text(f"{decode:,.1f} tok/s"), Text(f"tokrace: {ours} (decode_tok_s)")))
    first = _provider_first_s(source, data)
    if first is not None:
        ours = "—" if m.ttft_s is None else f"{m.ttft_s - m.connect_s:.3f} s"
        rows.append((f"{name}: to first token", Text(f"{first:.3f} s"),
                     Text(f"tokrace: {ours} (ttft_s − connect_s, network included)")))
    flat: list[tuple[str, Any]] = []
    for key, value in data.items():
        if key in _HIDDEN_FIELDS:
            continue
        if isinstance(value, Mapping):  # token details and the like: one level down, named by their path
            flat += [(f"{key}.{inner}", v) for inner, v in value.items()]
        else:
            flat.append((key, value))
    fields = " · ".join(f"{key} {_field(key, value)}" for key, value in flat)
    rows.append((name, Text("as sent"), Text(fields or "no fields", style="dim")))
    return rows


def _provider_first_s(source: str, data: Mapping[str, Any]) -> float | None:
    """The provider's own time before its first token: queue and prompt time, or llama.cpp's prompt time."""
    if source == "llamacpp":
        prompt_ms = data.get("prompt_ms")
        return prompt_ms / 1000.0 if _number(prompt_ms) else None
    queue, prompt = data.get("queue_time"), data.get("prompt_time")
    if not _number(prompt):
        return None
    return prompt + (queue if _number(queue) else 0.0)


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _field(key: str, value: Any) -> str:
    """One field of a provider's timing, in its unit."""
    if not _number(value):
        text = str(value)
        return text if len(text) <= 40 else text[:39] + "…"
    if isinstance(value, int):
        return f"{value:,}"
    if key.endswith("_time"):
        return f"{value:.4f} s"
    if key.endswith("_ms"):
        return f"{value:.2f} ms"
    return f"{value:,.2f}"


def wire_table(rows: Sequence[tuple[str, Text, Text]]) -> Table:
    """The rows of :func:`wire_rows` as a table, to go under the metrics."""
    table = Table(expand=True, show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("from the response", no_wrap=True)
    table.add_column("value", justify="right", max_width=28)
    table.add_column("where from · tokrace beside it", ratio=1)
    for name, value, note in rows:
        table.add_row(Text(name), value, note)
    return table


class DetailsScreen(ModalScreen[None]):
    """Every metric of one lane, a turn at a time."""

    CSS_PATH = "details.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,d,q", "dismiss", "Close"),
        Binding("left", "turn(-1)", "Previous turn"),
        Binding("right", "turn(1)", "Next turn"),
    ]

    def __init__(self, index: int, lane: LiveLane, events: Sequence[Event]) -> None:
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
        title.append(f"  {tier.model or '(no model)'} · {tier.raced_on}")
        if tier.service_tier:
            title.append(f" · service tier {tier.service_tier}")
        if tier.base_url:
            title.append(f" · {mask_url(tier.base_url)}")
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
            self.problem.update(Content(f"✗ {m.error}"))
        table = details_table(m, tier, self.size.width)
        if page is None or not over_http(page):
            self.body.update(table)  # a whole loop, or an offline lane: there was no response to speak of
        else:
            rows = wire_rows(m, page, tier, self._warning())
            self.body.update(Group(table, Text(""), wire_table(rows)))

    def _warning(self) -> Style:
        """The theme's warning colour, bold: a tier got that is not the one asked for."""
        try:
            colour = Color.parse(self.app.theme_variables.get("warning", "yellow"))
        except ColorParseError:
            colour = Color.parse("yellow")
        return Style(color=colour.rich_color, bold=True)
