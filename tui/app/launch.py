"""Opening the screen: a race on the tiers, a replay of a recording, an export drawn by the screen. The command
line reaches these through :class:`AppScreen` only when there is a screen (a terminal, or a browser tab of
``tokrace web``); Textual is imported inside them, never on the headless paths."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from tokrace.providers.model.errors import TokraceError
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec

from ..cli.screen import ThemeListing

if TYPE_CHECKING:
    from tokrace.providers.loop.scenario import Scenario
    from tokrace.providers.proxy.live import LiveProxy
    from tokrace.providers.recording import Recording
    from tokrace.providers.runs.load import LoadPlan
    from tokrace.providers.runs.record_paths import RecordPlan
    from tokrace.providers.voice.lens import VoiceSettings
    from tokrace.providers.voice.speak import Speaker

MAX_LANES: Final[int] = 6
"""The screen shows two to six lanes side by side."""

PRESENT_THEME: Final[str] = "projector"
"""``--present`` uses it unless ``--theme`` names another."""


def check_lanes(tiers: Sequence[TierSpec]) -> None:
    if len(tiers) > MAX_LANES:
        raise TokraceError(f"the screen races up to {MAX_LANES} tiers and this race has {len(tiers)}; "
                           "choose some with --tiers NAME,NAME")


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector off while the race screen starts: the app turns it on again once its first frame is
    written (``TokraceApp``), this when the app is gone at the latest. What start-up builds (modules, the widget
    tree) lives as long as the screen, and looking through it for garbage took 60 to 80 ms of the first frame."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def run_race(tiers: Sequence[TierSpec], request: TurnRequest, scenario: Scenario | None = None, *,
             theme: str | None = None, configured_theme: str | None = None, record: RecordPlan | None = None,
             voice: VoiceSettings | None = None, speaker: Speaker | None = None, warm: bool = False,
             podium: bool = True, present: bool = False) -> int:
    """Race the tiers on screen until the user quits; ``theme`` is ``--theme``, ``configured_theme`` the
    config's. With ``record`` every race is recorded, and once the screen is gone each file is named on stderr.
    With ``voice`` the voice lens is on from the start; ``speaker`` speaks one lane aloud; with ``warm`` each
    HTTP tier opens its connection before the first race. ``podium`` shows the finish line when a race ends;
    ``present`` is the presenter's view, on the projector theme unless a theme is asked for."""
    check_lanes(tiers)
    with collector_paused():
        from .app import build_app
        from .theming import AppThemes

        themes = AppThemes(requested=theme or (PRESENT_THEME if present else None), configured=configured_theme)
        app = build_app(tiers, request, scenario=scenario, themes=themes, record=record, voice=voice,
                        speaker=speaker, warm=warm, podium=podium, present=present)
        app.run()
    for path in app.runner.recorded:
        print(f"recorded to {path}", file=sys.stderr)
    return app.return_code or 0


def run_replay(recording: Recording, tiers: Sequence[TierSpec], speed: float = 1.0,
               idle_cap: float | None = None, run: int | None = None, *, theme: str | None = None,
               voice: VoiceSettings | None = None, speaker: Speaker | None = None, caption: str | None = None,
               podium: bool = True, present: bool = False) -> int:
    """Replay a recording on screen with its original timing, under the user's controls; ``caption`` is a
    sentence shown under the replay bar."""
    check_lanes(tiers)
    with collector_paused():
        from tokrace.providers.runs.replay_control import ReplayControl, replay_duration

        from .app import build_app
        from .theming import AppThemes

        themes = AppThemes(requested=theme or (PRESENT_THEME if present else None))
        control = ReplayControl(recording.path, replay_duration(recording, run), speed, recording=recording,
                                idle_cap=idle_cap, run=run, caption=caption)
        app = build_app(tiers, TurnRequest(prompt=recording.prompt), replay=control, themes=themes, voice=voice,
                        speaker=speaker, podium=podium, present=present)
        app.run()
    return app.return_code or 0


def run_load(tiers: Sequence[TierSpec], request: TurnRequest, plan: LoadPlan, *, theme: str | None = None,
             configured_theme: str | None = None, warm: bool = False, stall_threshold_s: float = 0.25) -> int:
    """A load on the tiers (``--concurrency``) on screen, one lane per tier, until the user quits; the exit code
    (1 when a request of a load that ran to its end failed, else 0)."""
    check_lanes(tiers)
    from tokrace.providers.runs.live_load import LoadRunner
    from tokrace.providers.timing.clock import RealClock

    from .load_app import LoadApp
    from .theming import AppThemes

    runner = LoadRunner(tiers, request, plan, RealClock(), warm=warm, stall_threshold_s=stall_threshold_s)
    app = LoadApp(runner, themes=AppThemes(requested=theme, configured=configured_theme))
    code = app.run()
    if app.return_code not in (None, 0):
        return app.return_code
    if runner.problem is not None:
        print(f"tokrace: {runner.problem}", file=sys.stderr)
        return 2
    result = runner.result
    failed = result is not None and not result.stopped and not result.all_ok  # (quitting early is no failure)
    return code or (1 if failed else 0)


class AppScreen:
    """The race screen behind the command line's :class:`tokrace.tui.cli.screen.Screen`: each call looks its
    function up when it is made, and Textual is imported only then."""

    max_lanes = MAX_LANES

    def check_lanes(self, tiers: Sequence[TierSpec]) -> None:
        check_lanes(tiers)

    def check_theme(self, name: str) -> None:
        from tokrace.themes.loader import load_themes

        from .theming import check_theme

        check_theme(name, load_themes())

    def themes(self) -> ThemeListing:
        from tokrace.themes.loader import load_themes

        catalog = load_themes()
        return ThemeListing({name: loaded.origin for name, loaded in catalog.themes.items()},
                            [str(problem) for problem in catalog.problems])

    def run_race(self, tiers: Sequence[TierSpec], request: TurnRequest, scenario: Scenario | None = None,
                 **options: Any) -> int:
        return run_race(tiers, request, scenario, **options)

    def run_replay(self, recording: Recording, tiers: Sequence[TierSpec], speed: float = 1.0,
                   idle_cap: float | None = None, run: int | None = None, **options: Any) -> int:
        return run_replay(recording, tiers, speed, idle_cap, run, **options)

    async def watch_proxy(self, live: LiveProxy, now: Callable[[], float], heading: str, hint: str,
                          follow: Callable[[Callable[[str], None]], Awaitable[int]], *,
                          theme: str | None = None) -> int:
        from .proxy_app import ProxyApp
        from .theming import AppThemes

        app = ProxyApp(live, now, follow, heading, hint, themes=AppThemes(requested=theme))
        await app.run_async()
        return app.return_code or 0

    def run_load(self, tiers: Sequence[TierSpec], request: TurnRequest, plan: LoadPlan, **options: Any) -> int:
        return run_load(tiers, request, plan, **options)

    async def export_svg(self, recording: Recording, *, run: int | None, at: float | None,
                         size: tuple[int, int] | None, theme: str | None) -> str:
        from .export_media import DEFAULT_SIZE, screen_svg
        from .theming import AppThemes

        return await screen_svg(recording, run=run, at=at, size=size or DEFAULT_SIZE,
                                themes=AppThemes(requested=theme))

    async def export_cast(self, recording: Recording, *, run: int | None, size: tuple[int, int] | None,
                          theme: str | None, title: str, progress: Callable[[float], None] | None = None) -> str:
        from .export_media import DEFAULT_SIZE, screen_cast
        from .theming import AppThemes

        return await screen_cast(recording, run=run, size=size or DEFAULT_SIZE, themes=AppThemes(requested=theme),
                                 title=title, progress=progress)
