"""The live proxy screen: a lane per session lane as its calls happen, the shared timeline with each ``--on`` tier's
session re-timed beside it, a running breakdown and the verdict so far. It samples :class:`LiveProxy` (fed by the
proxy's events) at frame rate; no event touches a widget."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Final

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Static

from tokrace.providers.proxy.live import KINDS, LiveProxy

from ..widgets.footer import RaceFooter
from ..widgets.gauge import nice_scale
from ..widgets.lane import LaneView, gauge_peak
from ..widgets.timeline import Timeline

FRAME_HZ: Final[int] = 8
"""Frames a second: the lanes' text and the timeline; the figures every ``SLOW_EVERY``th frame."""
SLOW_EVERY: Final[int] = 4

SHOWN_LANES: Final[int] = 4
"""Session lanes shown side by side: the latest to open (the timeline shows every lane)."""


def duration(seconds: float) -> str:
    """A running time as a person reads it: 4.0 s, 2 min 05 s, 1 h 02 min."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def breakdown_line(live: LiveProxy, now: float) -> str:
    """Where the session's time went so far, its calls and tokens."""
    parts = live.breakdown(now)
    total = sum(parts.values())
    shares = " · ".join(f"{kind} {duration(parts[kind])}"
                        + (f" ({100 * parts[kind] / total:.0f} %)" if total > 0 else "") for kind in KINDS)
    tokens_in, tokens_out = live.tokens()
    calls = live.calls()
    return f"so far: {shares} · {calls} call{'s' if calls != 1 else ''} · {tokens_in:,} in / {tokens_out:,} out tokens"


class ProxyScreen(Screen[None]):
    """Lanes, timeline, breakdown and verdicts of a proxied session, live."""

    CSS_PATH = ["race.tcss", "proxy.tcss"]  # noqa: RUF012 (Textual types it as an instance attribute)
    AUTO_FOCUS = ""
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]  # noqa: RUF012 (Textual types it as an instance attribute)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("z", "zoom", "Zoom", tooltip="zoom the timeline into its start: ×1, ×2, ×4, ×8"),
        Binding("q", "app.quit", "Quit", tooltip="stop the proxy: the recording is written and the report printed"),
    ]

    def __init__(self, live: LiveProxy, now: Callable[[], float], heading: str, hint: str = "", *,
                 animate: bool = True) -> None:
        super().__init__()
        self.live = live
        self.now = now
        """The session's clock (seconds since the proxy started listening)."""
        self.animated = animate
        """Off in tests: no frame timer (the test calls :meth:`sample`)."""
        self.heading = Static(heading, id="proxy-heading", markup=False)
        self.hint = Static(hint or "waiting for the first model call…", id="proxy-hint", markup=False)
        self.timeline = Timeline(id="timeline")
        self.breakdown = Static("", id="proxy-breakdown", markup=False)
        self.verdicts = Static("", id="proxy-verdicts", markup=False)
        self.notice = Static("", id="notice", markup=False)
        self.views: list[LaneView] = []
        self._frame = 0
        self._peak = 0.0
        self._version = -1
        self._bound = 0

    def compose(self) -> ComposeResult:
        yield self.heading
        yield self.hint
        yield Container(id="lanes")
        yield self.timeline
        yield self.breakdown
        yield self.verdicts
        yield self.notice
        yield RaceFooter()

    def on_mount(self) -> None:
        self.verdicts.display = bool(self.live.retimed)
        if self.animated:
            self.set_interval(1 / FRAME_HZ, self.sample)

    def say(self, line: str) -> None:
        """A line the proxy says (a call ended, the agent stopped) on the notice line."""
        self.notice.update(Content(line))
        self.notice.display = True

    def sample(self, force: bool = False) -> None:
        """Read the live model and repaint what moved."""
        live = self.live
        now = self.now()
        self._frame += 1
        slow = force or self._frame % SLOW_EVERY == 0
        if len(live.lanes) != self._bound:
            self._bind()
            slow = True
        if live.lanes:
            self.hint.display = False
        retimed = [r.lane for r in live.retimed] if live.lanes else []  # (no row to re-time before a call)
        self.timeline.lanes = [*live.lanes, *retimed]
        if slow:
            for lane in live.lanes:
                self._peak = max(self._peak, gauge_peak(lane, now))
        scale = nice_scale(self._peak)
        for view in self.views:
            view.sample(now, scale, slow)
        self.timeline.sample(now)
        if slow and live.lanes:
            self.breakdown.update(breakdown_line(live, now))
            verdicts = live.verdicts(now)
            if verdicts:
                self.verdicts.update("\n".join(v.sentence() for v in verdicts))

    def _bind(self) -> None:
        """Show the latest ``SHOWN_LANES`` lanes (a lane opens when its session's first call does)."""
        live = self.live
        self._bound = len(live.lanes)
        first = max(0, len(live.lanes) - SHOWN_LANES)
        box = self.query_one("#lanes", Container)
        box.remove_children()
        self.views = [LaneView(i, live.lanes[i]) for i in range(first, len(live.lanes))]
        box.mount_all(self.views)
        self.timeline.bind([*live.lanes, *(r.lane for r in live.retimed)] if live.lanes else [])

    def action_zoom(self) -> None:
        self.timeline.cycle_zoom()
