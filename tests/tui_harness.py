"""Helpers for the screen's tests: the app on virtual time, scripted lanes for every state, frame control."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Static

from tokrace.providers.adapters import Provider, create_provider
from tokrace.providers.config.demo import DEMO_MAX_TOKENS, DEMO_PROMPT, demo_tiers
from tokrace.providers.model.events import Event
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import Price, TierSpec
from tokrace.providers.recording import Recorder
from tokrace.providers.runs.replay_control import ReplayControl
from tokrace.providers.timing.clock import Clock, VirtualClock
from tokrace.tui.app.app import TokraceApp, build_app


class ScriptedProvider(Provider):
    """Plays a fixed list of events, each at its own ``t`` after the turn starts (for states no profile makes)."""

    name = "scripted"
    plays_whole_lane = True

    def __init__(self, tier: TierSpec, events: Sequence[Event]) -> None:
        super().__init__(tier)
        self.events = list(events)

    async def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        import dataclasses

        start = clock.now()
        for event in self.events:
            stamp = await clock.sleep_until(start + event.t)
            yield dataclasses.replace(event, t=stamp)


def scripted(name: str, events: Sequence[Event], model: str = "scripted-1") -> TierSpec:
    """A tier whose lane plays ``events`` (see :func:`factory`)."""
    return TierSpec(name=name, provider="scripted", model=model, options={"events": list(events)})


def factory(tier: TierSpec) -> Provider:
    """Builds scripted lanes as scripted, everything else as configured."""
    if tier.provider == "scripted":
        return ScriptedProvider(tier, tier.options["events"])
    return create_provider(tier)


class LateClock(VirtualClock):
    """Virtual time whose sleepers wake ``late_s`` after their moment every ``every``-th time, as a loop busy
    drawing frames wakes them on the real clock."""

    def __init__(self, late_s: float = 0.03, every: int = 7) -> None:
        super().__init__()
        self.late_s, self.every, self._sleeps = late_s, every, 0

    async def sleep_until(self, t: float) -> float:
        woke = await super().sleep_until(t)
        self._sleeps += 1
        if self._sleeps % self.every == 0:
            woke = await super().sleep_until(woke + self.late_s)
        return woke


def demo_app(tiers: Sequence[TierSpec] | None = None, prompt: str = DEMO_PROMPT,
             max_tokens: int = DEMO_MAX_TOKENS, scenario: str | None = None,
             clock: VirtualClock | None = None) -> tuple[TokraceApp, VirtualClock]:
    """The app on a virtual clock: nothing moves until the test advances time. With ``scenario`` (a built-in's
    name) every lane plays that loop."""
    from tokrace.providers.loop.scenario_file import load_scenario

    clock = clock if clock is not None else VirtualClock()
    loop = load_scenario(scenario) if scenario is not None else None
    if loop is not None:
        prompt = loop.first_prompt()
    app = build_app(list(tiers) if tiers is not None else demo_tiers(), TurnRequest(prompt, max_tokens),
                    clock_factory=lambda: clock, provider_factory=factory, animate=False, freeze_gc=False,
                    scenario=loop)
    return app, clock


def failing_demo_tiers() -> list[TierSpec]:
    """The demo with its priority lane failing part-way (the others race on)."""
    tiers = demo_tiers()
    tiers[1].options["fail_after_tokens"] = 60
    return tiers


def text_of(widget: Static) -> str:
    """What a Static shows, as plain text (tables and Rich text included)."""
    from rich.console import Console

    console = Console(width=240, color_system=None)
    with console.capture() as captured:
        console.print(widget.content)
    return captured.get()


async def at(pilot: Pilot[object], clock: VirtualClock, t: float) -> None:
    """Move the race to ``t`` seconds and draw one whole frame of it."""
    app = pilot.app
    assert isinstance(app, TokraceApp)
    await app.runner.wait_started()
    await clock.advance_to(app.runner.race.origin + t if app.runner.race else t)
    app.screen.sample(force=True)
    await pilot.pause()


async def record_demo(path: Path, max_tokens: int = 40) -> Path:
    """A recording of a short demo race, as ``tokrace bench`` writes it."""
    from tokrace.providers.race.race import Race

    tiers = demo_tiers()
    recorder = Recorder(path, "Why?", tiers)
    clock = VirtualClock()
    await clock.drive(Race(tiers, TurnRequest("Why?", max_tokens), clock, [recorder]).run())
    recorder.close()
    return path


def replay_app(path: Path) -> tuple[TokraceApp, VirtualClock, ReplayControl]:
    """The replay screen on a recording, its playback clock over virtual time."""
    from tokrace.providers.adapters.replay import replay_tiers
    from tokrace.providers.recording import read_recording
    from tokrace.providers.runs.replay_control import replay_duration

    recording = read_recording(path)
    base = VirtualClock()
    control = ReplayControl(path, replay_duration(recording), base=lambda: base)
    app = build_app(replay_tiers(recording), TurnRequest(recording.prompt), replay=control, animate=False,
                    freeze_gc=False)
    return app, base, control


PRICED = Price(input=5.0, output=30.0)
"""A price for lanes whose cost the tests read."""


def load_app(plan: object, tiers: Sequence[TierSpec] | None = None,
             max_tokens: int = 200) -> tuple[object, VirtualClock]:
    """The load screen (``tokrace --concurrency``) on a virtual clock: nothing moves until the test advances time."""
    from tokrace.providers.runs.live_load import LoadRunner
    from tokrace.providers.runs.load import LoadPlan
    from tokrace.tui.app.load_app import LoadApp

    assert isinstance(plan, LoadPlan)
    clock = VirtualClock()
    runner = LoadRunner(list(tiers) if tiers is not None else demo_tiers(), TurnRequest(DEMO_PROMPT, max_tokens),
                        plan, clock)
    return LoadApp(runner, animate=False), clock


async def load_at(pilot: Pilot[object], clock: VirtualClock, t: float) -> None:
    """Move the load to ``t`` seconds and draw one frame of it."""
    from tokrace.tui.app.screens.load import LoadScreen

    await pilot.pause()
    await clock.advance_to(t)
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, LoadScreen)
    screen.sample()
    await pilot.pause()
