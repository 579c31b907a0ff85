"""Render the README's screenshots: the offline demo on virtual time, stopped at fixed moments, saved as SVG.

Never by hand, so they stay true as the screen changes; the same moments give the same pictures every time.

    python scripts/screenshots.py [--out screenshots] [--only NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tokrace.providers.config.demo import DEMO_MAX_TOKENS, DEMO_PROMPT, demo_tiers
from tokrace.providers.loop.scenario_file import load_scenario
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.timing.clock import VirtualClock
from tokrace.themes.loader import DEFAULT_THEME, load_themes
from tokrace.themes.loader import builtin_themes as builtin_theme_names
from tokrace.tui.app.app import build_app
from tokrace.tui.app.theming import AppThemes
from tokrace.tui.cli.export_files import keep_spaces
from tokrace.tui.cli.settings import Settings


def voice_demo() -> list[TierSpec]:
    """Standard and ultrafast Sol with a 2.5 tok/s tier, to show the voice trailing the text and catching it."""
    slow = TierSpec(name="Slow local", provider="synthetic", model="local-3b",
                    options={"ttft_ms": 300, "tok_s": 2.5, "seed": 4})
    return [*demo_tiers()[::2], slow]


def failing_demo() -> list[TierSpec]:
    """The demo with its priority lane failing part-way, to show an error inside a lane."""
    tiers = demo_tiers()
    tiers[1].options["fail_after_tokens"] = 60
    return tiers


TRACE = (Path(__file__).resolve().parent.parent / "tests" / "providers" / "traces" / "fixtures" / "claude-code"
         / "session-a.jsonl")
"""A hand-written Claude Code session (a sub-agent, a retry, a failed tool, a person away for an hour)."""


@dataclass(frozen=True)
class Shot:
    """One screenshot: which tiers, the terminal size, the moment of the race, then keys to press; the theme,
    a scenario to race instead of the demo prompt, the finish line, and the presenter's view."""

    name: str
    size: tuple[int, int]
    at: float
    keys: tuple[str, ...] = ()
    tiers: list[TierSpec] = field(default_factory=demo_tiers)
    theme: str = DEFAULT_THEME
    scenario: str | None = None
    trace: Path | None = None
    """An agent trace to replay (paused at ``at``) instead of racing tiers."""
    podium: bool = False
    present: bool = False


SHOTS = [
    Shot("race-mid", (160, 45), 2.0),
    Shot("race-finished", (160, 45), 10.0),
    Shot("podium", (160, 45), 10.0, podium=True),
    Shot("podium-narrow", (80, 24), 10.0, podium=True),
    Shot("present", (160, 45), 2.0, theme="projector", present=True),
    Shot("race-narrow", (80, 24), 2.0),
    Shot("lane-error", (160, 45), 3.0, tiers=failing_demo()),
    Shot("details", (160, 45), 10.0, ("3", "d")),
    Shot("help", (100, 40), 1.0, ("question_mark",)),
    Shot("voice", (160, 45), 36.0, ("v",), tiers=voice_demo()),
    Shot("bottlenecks", (160, 45), 200.0, ("b",), scenario="coding-loop"),
    Shot("trace-replay", (160, 45), 21.0, trace=TRACE),
    Shot("trace-bottlenecks", (160, 45), 700.0, ("b",), trace=TRACE),
    # One per built-in theme, on an agent loop so the timeline shows waits, model, tool and human segments.
    *(Shot(f"theme-{name}", (160, 45), 12.0, theme=name, scenario="incident") for name in builtin_theme_names()),
]
"""Every screenshot the README shows."""


def builtin_themes(scratch: Path, theme: str = DEFAULT_THEME) -> AppThemes:
    """Only the built-in themes and nothing remembered: what a new user sees, whatever this machine holds."""
    return AppThemes(load_themes(user_dir=scratch / "themes"), Settings(scratch / "settings.json"),
                     requested=theme)


async def render_trace(shot: Shot, trace: Path, out: Path) -> Path:
    """An agent trace replayed on the race screen, paused at ``shot.at``."""
    from tokrace.providers.adapters.replay import replay_tiers
    from tokrace.providers.recording import read_recording
    from tokrace.providers.runs.replay_control import ReplayControl, replay_duration
    from tokrace.providers.traces.read import read_file
    from tokrace.providers.traces.to_events import write_recording

    base = VirtualClock()
    with tempfile.TemporaryDirectory() as scratch:
        themes = builtin_themes(Path(scratch), shot.theme)
        path = write_recording(list(read_file(trace).traces), Path(scratch) / f"{trace.stem}.jsonl")
        recording = read_recording(path)
        control = ReplayControl(path, replay_duration(recording), base=lambda: base)
        app = build_app(replay_tiers(recording), TurnRequest(recording.prompt), replay=control, animate=False,
                        freeze_gc=False, themes=themes)
        async with app.run_test(size=shot.size) as pilot:
            await app.runner.wait_started()
            await base.advance_to(shot.at)
            await pilot.press("space", *shot.keys)
            await pilot.pause()
            target = out / f"{shot.name}.svg"
            target.write_text(keep_spaces(app.export_screenshot(title="tokrace")), encoding="utf-8")
    return target


async def render(shot: Shot, out: Path) -> Path:
    if shot.trace is not None:
        return await render_trace(shot, shot.trace, out)
    clock = VirtualClock()
    with tempfile.TemporaryDirectory() as scratch:
        themes = builtin_themes(Path(scratch), shot.theme)
    scenario = None if shot.scenario is None else load_scenario(shot.scenario)
    prompt = DEMO_PROMPT if scenario is None else scenario.first_prompt()
    app = build_app(shot.tiers, TurnRequest(prompt, DEMO_MAX_TOKENS), clock_factory=lambda: clock,
                    animate=False, freeze_gc=False, themes=themes, scenario=scenario, podium=shot.podium,
                    present=shot.present)
    async with app.run_test(size=shot.size) as pilot:
        await app.runner.wait_started()
        race = app.runner.race
        await clock.advance_to((race.origin if race is not None else 0.0) + shot.at)
        app.screen.sample(force=True)
        await pilot.pause()
        await pilot.press(*shot.keys)
        await pilot.pause()
        path = out / f"{shot.name}.svg"
        path.write_text(keep_spaces(app.export_screenshot(title="tokrace")), encoding="utf-8")
    return path


TRACE_SHOTS = {"trace-on": (Path(__file__).resolve().parent.parent / "examples" / "traces" / "add-endpoint.json",
                             "Sol standard,Sol ultrafast", (160, 45), 900.0)}
"""The replay of a trace racing its re-timed lanes: the file, the tiers, the terminal size, the moment."""


async def render_trace_on(name: str, out: Path) -> Path:
    """``tokrace replay TRACE --on TIERS`` on the demo tiers, at a fixed moment of virtual time."""
    import argparse as _argparse

    from tokrace.providers.adapters.replay import replay_tiers
    from tokrace.providers.config.load import Config
    from tokrace.providers.recording import read_recording
    from tokrace.providers.runs.replay_control import ReplayControl, replay_duration
    from tokrace.providers.traces.read import read_file
    from tokrace.tui.cli.traces_compare import build_comparison, write_race

    file, on, size, at = TRACE_SHOTS[name]
    trace = read_file(file).traces[0]
    args = _argparse.Namespace(on=on, original_price=None, seed=None, config=None)
    config = Config(source=None)
    cmp = build_comparison([trace], args, config, 600.0)
    price = next((t.price for t in config.tiers if t.model in cmp.rows[0].original.models and t.price), None)
    base = VirtualClock()
    with tempfile.TemporaryDirectory() as scratch:
        themes = builtin_themes(Path(scratch))
        path = write_race(read_file(file).traces[0], cmp, price, Path(scratch) / f"{file.stem}-on.jsonl", 600.0)
        recording = read_recording(path)
        control = ReplayControl(path, replay_duration(recording), base=lambda: base, caption=cmp.verdict)
        app = build_app(replay_tiers(recording), TurnRequest(recording.prompt), replay=control, animate=False,
                        freeze_gc=False, themes=themes)
        async with app.run_test(size=size) as pilot:
            await app.runner.wait_started()
            await base.advance_to(at)
            app.screen.sample(force=True)
            await pilot.pause()
            target = out / f"{name}.svg"
            target.write_text(keep_spaces(app.export_screenshot(title="tokrace")), encoding="utf-8")
    return target


PROXY_SHOTS = {"proxy-live": ((160, 45), 30.0)}
"""``tokrace proxy --on "Sol ultrafast"`` live, on the demo session: the terminal size, the moment."""


async def render_proxy(name: str, out: Path) -> Path:
    """The live proxy screen at a moment of the made-up session (``providers/proxy/demo.py``)."""
    from tokrace.providers.config.demo import demo_tiers
    from tokrace.providers.proxy.demo import demo_session
    from tokrace.providers.proxy.live import LiveProxy
    from tokrace.providers.traces.retime import tier_profile
    from tokrace.tui.app.proxy_app import ProxyApp

    size, at = PROXY_SHOTS[name]
    live = LiveProxy([tier_profile(next(t for t in demo_tiers() if t.name == "Sol ultrafast"))])
    for lane, event in demo_session(at):
        live(lane, event)
    with tempfile.TemporaryDirectory() as scratch:
        app = ProxyApp(live, lambda: at, None, "tokrace proxy · http://127.0.0.1:8787", animate=False,
                       themes=builtin_themes(Path(scratch)))
        async with app.run_test(size=size) as pilot:
            for _ in range(2):
                app.screen_.sample(force=True)
                await pilot.pause()
            target = out / f"{name}.svg"
            target.write_text(keep_spaces(app.export_screenshot(title="tokrace proxy")), encoding="utf-8")
    return target


LOAD_SHOTS = {"load": ((160, 45), 2.5), "load-narrow": ((80, 24), 2.5)}
"""The load screen (``tokrace --concurrency 16``) on the demo tiers: name → (size, seconds into the load)."""


async def render_load(name: str, out: Path) -> Path:
    """The demo tiers under a load of 16 streams each, stopped ``at`` seconds in."""
    from tokrace.providers.runs.live_load import LoadRunner
    from tokrace.providers.runs.load import LoadPlan
    from tokrace.tui.app.load_app import LoadApp
    from tokrace.tui.app.screens.load import LoadScreen

    size, at = LOAD_SHOTS[name]
    clock = VirtualClock()
    with tempfile.TemporaryDirectory() as scratch:
        themes = builtin_themes(Path(scratch))
    runner = LoadRunner(demo_tiers(), TurnRequest(DEMO_PROMPT, 200), LoadPlan((16,), requests=64), clock)
    app = LoadApp(runner, animate=False, themes=themes)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await clock.advance_to(at)
        await pilot.pause()
        assert isinstance(app.screen, LoadScreen)
        app.screen.sample()
        await pilot.pause()
        path = out / f"{name}.svg"
        path.write_text(keep_spaces(app.export_screenshot(title="tokrace")), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description="Render the README's screenshots to SVG.")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "screenshots")
    parser.add_argument("--only", metavar="NAME",
                        help="one of: " + ", ".join([*(s.name for s in SHOTS), *TRACE_SHOTS, *PROXY_SHOTS,
                                                     *LOAD_SHOTS]))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for shot in SHOTS:
        if args.only is None or shot.name == args.only:
            print(asyncio.run(render(shot, args.out)))
    for name in TRACE_SHOTS:
        if args.only is None or name == args.only:
            print(asyncio.run(render_trace_on(name, args.out)))
    for name in PROXY_SHOTS:
        if args.only is None or name == args.only:
            print(asyncio.run(render_proxy(name, args.out)))
    for name in LOAD_SHOTS:
        if args.only is None or name == args.only:
            print(asyncio.run(render_load(name, args.out)))


if __name__ == "__main__":
    main()
