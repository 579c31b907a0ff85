"""The Textual app: the race screen over a runner, the app's colour variables, and the command palette.

Kept thin on purpose: the screen composes the widgets, the runner runs races, the live model holds the state.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.geometry import Size
from textual.notifications import SeverityLevel
from textual.screen import Screen

from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.runs.record_paths import RecordPlan
from tokrace.providers.runs.runner import ClockFactory, ProviderFactory, RaceRunner
from tokrace.providers.timing.clock import Clock, RealClock

from ..cli.signals import EXIT_INTERRUPTED
from ..cli.signals import install as install_signals
from .render import after_first_frame, parse_once
from .screens.race import RaceScreen
from .theming import AppThemes
from .widgets.palette import APP_COLOURS

YOUNG_OBJECTS: Final[int] = 10_000
"""While the app runs (and keeps the race's history out of the collector's way), the collector looks at its
youngest objects once 10,000 more were made rather than Python's 700. Each look scans every object made since the
last one that still lives, most of them the lanes' (a piece of text per token): at 700, the few lines a frame
draws set one off nearly every frame at high rates, a third of a millisecond or more of a frame at 12,000 tok/s.
Objects that die young are freed at once either way; cycles wait a little longer (a few MB at most)."""

if TYPE_CHECKING:
    from tokrace.providers.loop.scenario import Scenario
    from tokrace.providers.runs.replay_control import ReplayControl
    from tokrace.providers.voice.lens import VoiceSettings
    from tokrace.providers.voice.live import LiveVoice
    from tokrace.providers.voice.speak import Speaker


class TokraceApp(App[int]):
    """Races (or replays) the tiers on one screen."""

    TITLE = "tokrace"
    CSS_PATH = "screens/race.tcss"
    """The race screen's stylesheet (the app's first screen, which Textual reads no stylesheet for)."""
    CSS = """
    ToastRack { display: none; }
    Toast { display: none; }
    """
    """No toast ever covers the lanes or the summary: the race screen shows every notice on its notice line. The
    toasts themselves are never displayed: Textual's toast rack sets its own ``display`` when a notification comes,
    which outranks any stylesheet (so the "Recorded" toast covered the timeline on a real terminal)."""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True, system=True)]
    """Ctrl+C quits at once, as SIGINT does (Textual's own asks to press another key, and keys typed after it
    would reach the app): the race stops, the recording is written, the terminal is restored, exit 130."""

    def __init__(self, runner: RaceRunner, replay: ReplayControl | None = None, *, animate: bool = True,
                 freeze_gc: bool = True, themes: AppThemes | None = None, voice: LiveVoice | None = None,
                 speaker: Speaker | None = None, podium: bool = False, present: bool = False) -> None:
        super().__init__()
        self.podium = podium
        """Show the finish line (ranking, times, speed-up in large type) when a race ends."""
        self.present = present
        """``--present``: gauges and timeline only, taller bars, final times, no notices, no footer."""
        self.runner = runner
        self.replay = replay
        self.voice = voice
        """The voice lens (on from the start with ``--voice``)."""
        self.speaker = speaker
        """Speaks one lane aloud (``--speak``); already one of the runner's listeners."""
        self.animated = animate
        """Off in tests and screenshots: no cursor blink, nothing that moves on its own."""
        self.freeze_gc = freeze_gc
        self.notice: tuple[str, str, SeverityLevel] | None = None
        """The latest notification (message, title, severity): the race screen's notice line shows it."""
        self.themes = AppThemes() if themes is None else themes
        """tokrace's themes (built-in and the user's), the one to start with, and where choices are kept."""
        self.themes.install(self)
        parse_once(self)
        self._forget_signals: Callable[[], None] | None = None
        self._gc_threshold: tuple[int, int, int] | None = None
        """The collector's thresholds before the app raised the youngest one (see ``YOUNG_OBJECTS``)."""

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_COLOURS)

    def action_interrupt(self) -> None:
        self.exit(None, EXIT_INTERRUPTED)

    def get_default_screen(self) -> Screen[Any]:
        """The race screen, as the app's first screen: not pushed over Textual's default one, which was composed,
        styled and laid out before the first frame for nothing (its stylesheet is the app's ``CSS_PATH``)."""
        screen = RaceScreen(self.runner, self.replay, animate=self.animated, freeze_gc=self.freeze_gc,
                            voice=self.voice, speaker=self.speaker, podium=self.podium, present=self.present)
        screen.add_class(*breakpoints(screen, self.size), update=False)
        return screen

    def on_mount(self) -> None:
        self.runner.notify = self._notify
        if not self.is_headless:  # a signal quits like q does: the race stops, the recording is written
            self._forget_signals = install_signals(lambda code: self.exit(None, code))
        self.themes.mount(self)
        after_first_frame(self.screen, self._settle)

    def _settle(self) -> None:
        """Once the first frame is written: the collector on again (see ``launch``), what exists now out of its way."""
        if self.freeze_gc:
            # A full collection over the mounted widget tree pauses the loop for ~100 ms about once a second;
            # what exists now lives for the whole run, so take it out of the collector's way.
            self._freeze()
        gc.enable()

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Keep the notification (as Textual does) and put it on the race screen's notice line, where it hides
        nothing, instead of a toast over the lanes or the summary."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
        plain = message if not markup else Content.from_markup(message).plain
        self.notice = (plain, title, severity)

    def _notify(self, message: str, title: str, severity: SeverityLevel) -> None:
        if self.is_running:  # a race stopped by quitting still says where it went: on stderr (see launch)
            self.notify(message, title=title, severity=severity, markup=False)

    def _freeze(self) -> None:
        gc.collect()
        gc.freeze()
        if self._gc_threshold is None:
            self._gc_threshold = threshold = gc.get_threshold()
            gc.set_threshold(max(YOUNG_OBJECTS, threshold[0]), *threshold[1:])

    async def on_unmount(self) -> None:
        await self.runner.aclose()
        if self._forget_signals is not None:
            self._forget_signals()
        if self.speaker is not None:
            await self.speaker.aclose()
        if self.freeze_gc:
            gc.unfreeze()
        if self._gc_threshold is not None:
            gc.set_threshold(*self._gc_threshold)
            self._gc_threshold = None

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        if isinstance(screen, RaceScreen):
            for title, help_text, callback in screen.commands():
                yield SystemCommand(title, help_text, callback)
        yield from super().get_system_commands(screen)


def breakpoints(screen: Screen[Any], size: Size) -> list[str]:
    """The screen's breakpoint classes at ``size``, as Textual sets them once the screen learns its size: given
    before it is mounted, the whole screen is styled once rather than again with them."""
    found = []
    for points, extent in ((screen.HORIZONTAL_BREAKPOINTS, size.width), (screen.VERTICAL_BREAKPOINTS, size.height)):
        found += [name for at, name in sorted(points or (), reverse=True) if extent >= at][:1]
    return found


def build_app(tiers: Sequence[TierSpec], request: TurnRequest, *, clock_factory: ClockFactory | None = None,
              provider_factory: ProviderFactory | None = None, replay: ReplayControl | None = None,
              scenario: Scenario | None = None, animate: bool = True, freeze_gc: bool = True,
              themes: AppThemes | None = None, record: RecordPlan | None = None,
              voice: VoiceSettings | None = None, speaker: Speaker | None = None, warm: bool = False,
              podium: bool = False, present: bool = False) -> TokraceApp:
    """The app racing ``tiers`` on ``request`` (or a whole ``scenario``): on real time, or on the replay's
    playback clock. With ``record`` every race (never a replay) is recorded to its own file. With ``voice`` the
    voice lens is on from the start; ``speaker`` speaks one lane aloud; with ``warm`` connections open first.
    With ``podium`` the finish line shows when a race ends; ``present`` is the presenter's view."""
    factory: ClockFactory
    if replay is not None:
        factory = replay.make_clock
    elif clock_factory is not None:
        factory = clock_factory
    else:
        real: Clock = RealClock()
        factory = lambda: real  # noqa: E731 - one real clock for every race
    runner = RaceRunner(tiers, request, factory, scenario=scenario, record=None if replay is not None else record,
                        listeners=[speaker] if speaker is not None else (), warm=warm)
    if provider_factory is not None:
        runner.provider_factory = provider_factory
    from tokrace.providers.voice.live import LiveVoice

    lens = LiveVoice(voice, on=voice is not None)
    return TokraceApp(runner, replay, animate=animate, freeze_gc=freeze_gc, themes=themes, voice=lens,
                      speaker=speaker, podium=podium, present=present)
