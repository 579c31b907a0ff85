"""One lane of the race: its tier, a state badge, the streaming text (Markdown once final), its error, a
tok/s gauge with a sparkline, and TTFT, tokens, elapsed and cost.

The screen calls :meth:`LaneView.sample` every frame; the lane repaints only what changed, and the gauge and the
figures at most a few times a second, without a layout pass.
"""

from __future__ import annotations

from typing import Final

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from tokrace.providers.model.units import GLUE, duration
from tokrace.providers.race.live import SOURCE_MARK, LiveLane

from ..render import content_size
from .big_digits import BigDigits
from .frame_static import FrameStatic
from .gauge import Gauge
from .printable import printable
from .tail import TailText
from .voice import VoicePanel

BADGE_CHARS: Final[int] = 10
"""What the badge holds (12 cells, less a space each side): a tool's name shows beside the state when it fits."""

SHORT_ROWS: Final[int] = 4
BIG_ROWS: Final[int] = 16
"""From this many rows a lane of the presenter's view has room for its figure in large type (six rows) beside a
gauge of three; below (a small terminal), the gauge keeps the room and the badge carries the final time."""
"""A lane with fewer rows than this (head, text, gauge, figures) shows no text: the figures matter more."""

MARKDOWN_MAX_CHARS: Final[int] = 60_000
"""Longer answers (about 15,000 tokens) stay in the tail view: rendering them as Markdown takes a second."""


ORDINARY_TIERS: Final[frozenset[str]] = frozenset({"default", "standard", "auto"})
"""What servers report when nobody asked for a tier: not worth a word on a tier that asked for none."""


def worth_saying(asked: str | None, got: str) -> bool:
    """Whether the tier a server reported tells the reader something: always when one was asked for, else only
    when it is not the ordinary one (a tier that asked for nothing "got default" says nothing true or new)."""
    return bool(asked) or got.lower() not in ORDINARY_TIERS


def describe_tier(lane: LiveLane) -> Content:
    """Model, provider and the service tier asked for, in one line (literal text: never markup). Once the server
    says which tier it used, that comes first, beside the one asked for, highlighted when they differ."""
    tier = lane.tier
    parts = [tier.model or "(no model)", tier.raced_on]
    got = lane.tier_got
    if got is None or not worth_saying(tier.service_tier, got):
        return Content(" · ".join([*parts, tier.service_tier] if tier.service_tier else parts))
    asked = tier.service_tier
    style = "bold $warning" if asked and asked != got else ""
    return Content.assemble(f"{asked} → " if asked else "", (f"got {got}", style), " · " + " · ".join(parts))


def figures(lane: LiveLane, now: float, present: bool = False) -> str:
    """TTFT, tokens (marked by source), elapsed (end to end once ended, as the summary) and cost so far; in the
    presenter's view TTFT and tokens only (the time is the lane's big figure and its badge), so the line fits a
    lane a third of a 100-column projector wide."""
    ttft = duration(lane.ttft)
    tokens = f"{SOURCE_MARK[lane.tokens_source]}{lane.tokens:,}" if lane.tokens else "—"
    cost = lane.cost_so_far()
    money = "$—" if cost is None else f"${cost:.4f}"
    e2e = lane.e2e
    # a lane that failed before any answer has no time to give
    took = duration(lane.elapsed(now) if e2e is None and lane.ended_at is None else e2e)
    if present:
        return f"TTFT {ttft} · {tokens} tok"
    return f"TTFT {ttft} · {tokens} tok · {took} · {money}"


def gauge_reading(lane: LiveLane, now: float) -> tuple[float, str]:
    """The live rate while tokens flow; the average decode rate once the lane has ended."""
    if lane.ended_at is not None:
        decode = lane.decode_rate()
        return (0.0, "— tok/s") if decode is None else (decode, f"avg {decode:,.0f} tok/s")
    if lane.ttft is None:
        return 0.0, "— tok/s"
    rate = lane.rate(now)
    return rate, f"{rate:,.0f} tok/s"


def gauge_peak(lane: LiveLane, now: float) -> float:
    """The highest rate the lane's gauge and sparkline draw at ``now``: its reading (the live rate, or the average
    once ended) and its history. Never the decode rate of a running stream: over a first span of a millisecond it
    reads thousands of tok/s, and the shared scale would empty every other bar."""
    value, _ = gauge_reading(lane, now)
    return max([value, *lane.history_rates(now, len(lane.history))])


class LaneView(Vertical):
    """A lane's widgets, bound to one :class:`LiveLane` at a time (a new race rebinds them). Those hidden at the
    start (an error, the replay's pacing, the presenter's large figure) are mounted in their places the first time
    they show: the first frame composes and styles none of them."""

    def __init__(self, index: int, lane: LiveLane, *, focused: bool = False, present: bool = False) -> None:
        # focused from the start (the race screen's first lane): its styles are worked out once, not twice
        super().__init__(id=f"lane-{index}", classes=f"lane lane-{index % 6}{' -focused' if focused else ''}")
        self.index = index
        self.lane = lane
        self.tail = TailText(lane, classes="tail")
        self.final_text = Static(classes="final-text")
        self.final = VerticalScroll(self.final_text, classes="final")
        self.voice = VoicePanel(index, classes="voice")
        self.voice_on = False
        """The voice lens is on: the voiced answer and its playhead instead of the tail or the final answer."""
        self.meta = Static(describe_tier(lane), classes="lane-meta", markup=False)
        self.badge = Static("", classes="badge -idle")
        self.pace = Static("", classes="pace")
        """How a replay departs from real time (sped up, stepped, idle pauses capped); hidden when it does not."""
        self._pace = ""
        self.error = Static("", classes="lane-error")
        self.gauge = Gauge(index, classes="gauge")
        self.big = BigDigits("", classes="big")
        """The presenter's figure in large type: the live tok/s while it streams, the final time once done."""
        self.big_caption = Static("", classes="big-caption", markup=False)
        self.stats = FrameStatic("", classes="lane-stats")
        self._state = ""
        self._version = -1
        self._final_for: LiveLane | None = None
        self._final_shown = False
        """The final answer is rendered (and shown, unless the voice lens is on)."""
        self._tier_got: str | None = None
        self.present = present
        """The presenter's view: no answer text; once done, the badge shows the lane's final time."""
        self.border_title = Content(lane.tier.name)  # literal: a border title is markup otherwise
        for part in (self.final, self.error, self.voice, self.pace):
            part.display = False
        self.tail.display = not present
        self.head = Horizontal(Static(lane.tier.name, classes="lane-name", markup=False), self.meta, self.badge,
                               classes="lane-head")
        self._parts = (self.tail, self.final, self.voice, self.error, self.big, self.big_caption, self.gauge,
                       self.stats)
        """The body's widgets in their order, the hidden ones among them whether mounted yet or not. The final answer
        and the voice lens are always there: they take each other's place, and the voice lens draws what the screen
        hands it as soon as it shows (it read a size of the final answer's mounted after it, now and then)."""

    def compose(self) -> ComposeResult:
        yield self.head
        for part in self._parts:
            if part is self.big or part is self.big_caption:  # the stylesheet shows them in the presenter's view
                shown = self.present
            else:
                shown = part.display or part in (self.final, self.voice, self.gauge, self.stats)
            if shown:
                yield part

    def _place_shown(self) -> None:
        for part in (self.tail, self.error):
            if part.display:
                self._place(part)

    def _place(self, part: Widget) -> None:
        """Mount a part the first time it shows, in its place (a part hidden so far was never composed)."""
        if part.parent is not None or not self.is_attached:
            return  # (not composed yet: composed with the lane if it shows by then)
        if part is self.pace:
            self.head.mount(part, before=self.badge)
            return
        later = self._parts[self._parts.index(part) + 1:]
        self.mount(part, before=next(p for p in later if p.parent is self))

    def on_resize(self) -> None:
        self.set_class(self.content_size.height < SHORT_ROWS, "-short")
        self.set_class(self.content_size.height >= BIG_ROWS, "-roomy")

    def set_present(self, present: bool) -> None:
        """The presenter's view on or off: gauges and figures only, and the final time in the badge."""
        self.present = present
        if present:
            self._place(self.big)
            self._place(self.big_caption)
        self._state = ""  # redraw the badge
        self.gauge.lane_coloured = present
        self.show_voice(self.voice_on)

    def set_pace(self, text: str) -> None:
        """Show the replay's pacing beside the state ("" hides it)."""
        if text != self._pace:
            self._pace = text
            self.pace.update(Content(f" {text} "))
            self.pace.display = bool(text)
            if text:
                self._place(self.pace)

    def bind(self, lane: LiveLane) -> None:
        """Show a new race's lane: back to the streaming tail, no error."""
        self.lane = lane
        self.tail.bind(lane)
        self._state, self._version, self._final_for, self._final_shown = "", -1, None, False
        self._tier_got = None
        self.meta.update(describe_tier(lane))
        self.final.display = False
        self.tail.display = not self.voice_on and not self.present
        self.error.display = False
        self._place_shown()

    def show_voice(self, on: bool) -> None:
        """Voice mode on (the voiced answer and the playhead) or off (back to the tail, or the final answer)."""
        self.voice_on = on
        self.voice.display = on
        self.final.display = not on and self._final_shown and not self.present
        self.tail.display = not on and not self._final_shown and not self.present
        self._place_shown()

    def focus_body(self) -> None:
        """Focus what can scroll: the final answer once shown."""
        if self.final.display:
            self.final.focus()

    def sample(self, now: float, scale: float, slow: bool) -> None:
        """Repaint what moved since the last frame; the gauge and figures only when ``slow``."""
        lane = self.lane
        state = lane.state_at(now)
        if state != self._state:
            self._state = state
            slow = True  # the figures change with the state: never show "streaming" beside "TTFT —"
            label = f"{state}: {lane.detail}" if state in ("tool", "human") and lane.detail else state
            if len(label) > BADGE_CHARS:  # the tail names the tool or the person's step in full
                label = state
            if self.present and state == "done" and lane.e2e is not None:
                label = f"✓ {duration(lane.e2e, glue=GLUE)}"
            self.badge.update(Content(f" {label} "), layout=False)
            self.badge.set_classes(f"badge -{state}")
        if lane.version != self._version:
            self._version = lane.version
            self.tail.sync()
            if lane.error and not self.error.display:
                self.error.update(Content(f"✗ {printable(lane.error)}"))
                self.error.display = True
                self._place_shown()
            if lane.tier_got != self._tier_got:
                self._tier_got = lane.tier_got
                self.meta.update(describe_tier(lane), layout=False)
        if lane.finished and self._final_for is not lane:
            self._show_final(lane)
        if slow:
            value, label = gauge_reading(lane, now)
            self.gauge.set(value, label, scale, lane.history_rates(now, max(content_size(self.gauge).width, 1)))
            self.stats.update(figures(lane, now, self.present), layout=False)
            if self.present:
                self._show_big(lane, value)

    def _show_big(self, lane: LiveLane, rate: float) -> None:
        """The presenter's figure: the final time once the lane is done, else its tok/s (— before any token)."""
        if lane.ended_at is not None:
            e2e = lane.e2e
            self.big.show("" if e2e is None or not lane.ok else f"{e2e:.2f}")
            self.big_caption.update("s end to end" if e2e is not None and lane.ok else "")
        else:
            self.big.show(f"{rate:.0f}" if lane.ttft is not None else "")
            self.big_caption.update("tok/s" if lane.ttft is not None else "")

    def _show_final(self, lane: LiveLane) -> None:
        """Render the answer as Markdown, once, when nothing more will come."""
        from rich.markdown import Markdown  # markdown-it and pygments: kept off the path to the first frame

        self._final_for = lane
        answer = lane.answer_text()
        if not answer or len(answer) > MARKDOWN_MAX_CHARS:
            return  # keep the tail in view: nothing to render, or too much to render without a visible pause
        self.final_text.update(Markdown(printable(answer.expandtabs(4))))
        self._final_shown = True
        if not self.voice_on:
            self.tail.display = False
            self.final.display = not self.present
