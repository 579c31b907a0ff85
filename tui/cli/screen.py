"""The screen as the command line sees it: what a command may ask of the Textual app, handed in by ``tui/main.py``.

The command line never imports Textual (a test holds it): ``tokrace bench``, ``traces`` or ``--help`` start without
loading it, and the app stays behind this one seam.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tokrace.providers.loop.scenario import Scenario
    from tokrace.providers.model.messages import TurnRequest
    from tokrace.providers.model.tiers import TierSpec
    from tokrace.providers.proxy.live import LiveProxy
    from tokrace.providers.recording import Recording
    from tokrace.providers.runs.load import LoadPlan
    from tokrace.providers.runs.record_paths import RecordPlan
    from tokrace.providers.voice.lens import VoiceSettings
    from tokrace.providers.voice.speak import Speaker


@dataclass(slots=True)
class ThemeListing:
    """Every theme there is, with where it comes from, and a line for each broken theme file."""

    origins: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


class Screen(Protocol):
    """What the command line asks of the race screen. Checks raise a one-line ``TokraceError``."""

    max_lanes: int
    """The most lanes the screen shows side by side."""

    def check_lanes(self, tiers: Sequence[TierSpec]) -> None:
        """Refuse a race with more lanes than the screen shows."""

    def check_theme(self, name: str) -> None:
        """Refuse a theme name no theme has."""

    def themes(self) -> ThemeListing:
        """The themes (built-in and the user's) and the theme files that could not be loaded."""

    def run_race(self, tiers: Sequence[TierSpec], request: TurnRequest, scenario: Scenario | None = None, *,
                 theme: str | None = None, configured_theme: str | None = None, record: RecordPlan | None = None,
                 voice: VoiceSettings | None = None, speaker: Speaker | None = None, warm: bool = False,
                 podium: bool = True, present: bool = False) -> int:
        """Race the tiers on screen until the user quits; the exit code."""

    def run_replay(self, recording: Recording, tiers: Sequence[TierSpec], speed: float = 1.0,
                   idle_cap: float | None = None, run: int | None = None, *, theme: str | None = None,
                   voice: VoiceSettings | None = None, speaker: Speaker | None = None, caption: str | None = None,
                   podium: bool = True, present: bool = False) -> int:
        """Replay a recording on screen under the user's controls; the exit code."""

    async def watch_proxy(self, live: LiveProxy, now: Callable[[], float], heading: str, hint: str,
                          follow: Callable[[Callable[[str], None]], Awaitable[int]], *,
                          theme: str | None = None) -> int:
        """Show a proxied session live (on the running loop, where the proxy listens) until the person quits; the
        exit code. ``follow`` runs beside it, handed where to say a line."""

    def run_load(self, tiers: Sequence[TierSpec], request: TurnRequest, plan: LoadPlan, *, theme: str | None = None,
                 configured_theme: str | None = None, warm: bool = False, stall_threshold_s: float = 0.25) -> int:
        """A load on the tiers (``--concurrency``) on screen, one lane per tier, until the user quits."""

    async def export_svg(self, recording: Recording, *, run: int | None, at: float | None,
                         size: tuple[int, int] | None, theme: str | None) -> str:
        """The race screen at one moment of a recording, as SVG."""

    async def export_cast(self, recording: Recording, *, run: int | None, size: tuple[int, int] | None,
                          theme: str | None, title: str, progress: Callable[[float], None] | None = None) -> str:
        """The whole race on screen as an asciicast v3 file."""

