"""``tokrace replay TRACE --on TIERS`` on the screen: the original lane races one re-timed lane per tier on one
clock, under the verdict; each lane's loop equals the comparison's figures, and `b` shows where the time went."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static
from tui_harness import text_of

from tokrace.providers.adapters.replay import replay_tiers
from tokrace.providers.config.load import Config
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import Price
from tokrace.providers.recording import read_recording
from tokrace.providers.runs.replay_control import ReplayControl, replay_duration
from tokrace.providers.timing.clock import VirtualClock
from tokrace.providers.traces.compare import Comparison
from tokrace.providers.traces.model import Step, Trace
from tokrace.tui.app.app import TokraceApp, build_app
from tokrace.tui.app.widgets.bottleneck import BottleneckView, final_loop
from tokrace.tui.cli.traces_compare import build_comparison, write_race

ON = "Sol standard,Sol ultrafast"
SOL = Price(input=5.0, output=30.0)


def coding_trace() -> Trace:
    """A made-up coding loop on standard Sol: plan, two tools side by side, a test run, a review, the fix."""
    def model(id: str, start: float, end: float, out: int, after: tuple[str, ...], ttft: float) -> Step:
        return Step(id=id, kind="model", start=start, end=end, after=after, model="gpt-5.6-sol", label="gpt-5.6-sol",
                    input_tokens=12_000, cached_input_tokens=8_000, output_tokens=out, ttft_s=ttft)

    return Trace(file="/traces/fix-login.json", format="weka", session="fix-login", steps=[
        model("m1", 0.0, 10.3, 500, (), 1.1),
        Step(id="t1", kind="tool", start=10.3, end=12.3, after=("m1",), label="read_file"),
        Step(id="t2", kind="tool", start=10.3, end=13.8, after=("m1",), label="grep"),
        model("m2", 13.8, 22.0, 400, ("t1", "t2"), 0.9),
        Step(id="t3", kind="tool", start=22.0, end=40.0, after=("m2",), label="pytest"),
        model("m3", 40.0, 48.5, 420, ("t3",), 1.0),
        Step(id="h1", kind="human", start=48.5, end=78.5, after=("m3",), label="review"),
        model("m4", 78.5, 84.0, 250, ("h1",), 1.2),
    ])


def race_app(tmp_path: Path, podium: bool = False) -> tuple[TokraceApp, VirtualClock, Comparison]:
    """The replay screen on the trace racing its re-timed lanes, its playback clock over virtual time."""
    trace = coding_trace()
    args = argparse.Namespace(on=ON, original_price=SOL, seed=None, config=None)
    cmp = build_comparison([trace], args, Config(source=None), 600.0)
    path = write_race(coding_trace(), cmp, SOL, tmp_path / "fix-login-on.jsonl", 600.0)
    recording = read_recording(path)
    base = VirtualClock()
    control = ReplayControl(path, replay_duration(recording), base=lambda: base, caption=cmp.verdict)
    app = build_app(replay_tiers(recording), TurnRequest(recording.prompt), replay=control, animate=False,
                    freeze_gc=False, podium=podium)
    return app, base, cmp


async def test_the_original_races_its_re_timed_lanes_under_the_verdict(tmp_path: Path) -> None:
    app, base, cmp = race_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        assert [lane.tier.name for lane in app.runner.live.lanes] == ["original", "Sol standard", "Sol ultrafast"]
        assert text_of(app.screen.query_one("#replay-verdict", Static)).strip() == cmp.verdict
        assert cmp.verdict.startswith("On this trace, Sol ultrafast would have saved ")
        await base.advance_to(40.0)
        app.screen.sample(force=True)
        ultra, original = app.runner.live.lanes[2], app.runner.live.lanes[0]
        assert ultra.finished is False and original.finished is False
        await base.advance_to(200.0)
        app.screen.sample(force=True)
        await pilot.pause()
        assert all(lane.finished for lane in app.runner.live.lanes)
        summary = text_of(app.screen.query_one("#summary", Static))
        assert summary.startswith("Sol ultrafast finished first in ")
        # every lane's loop is the comparison's figure for its column: one set of numbers on screen and in tables
        row = cmp.rows[0]
        expected = [row.original, row.on["Sol standard"], row.on["Sol ultrafast"]]
        for run, analysis in zip(app.runner.race.lanes, expected, strict=True):
            loop = final_loop(run.events, run.tier)
            assert loop.e2e_s == pytest.approx(analysis.e2e_s, abs=1e-3)
            assert loop.model_share == pytest.approx(analysis.model_share, abs=1e-3)
        assert app.runner.live.lanes[0].tier.price == SOL
        await pilot.press("b")
        view = app.screen.query_one(BottleneckView)
        assert view.final and [b.name for b in view.rows] == ["original", "Sol standard", "Sol ultrafast"]
        assert [b.e2e_s for b in view.rows] == pytest.approx([a.e2e_s for a in expected], abs=1e-3)


def test_the_verdict_is_on_the_replay_screen_wide(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    app, base, _ = race_app(tmp_path)

    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.app.runner.wait_started()
        await base.advance_to(200.0)
        pilot.app.screen.sample(force=True)
        await pilot.press("b")

    assert snap_compare(app, terminal_size=(160, 45), run_before=run_before)


def test_the_race_mid_way_narrow(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    app, base, _ = race_app(tmp_path)

    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.app.runner.wait_started()
        await base.advance_to(30.0)
        pilot.app.screen.sample(force=True)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


async def test_the_finish_line_b_and_summary_compare_with_the_original(tmp_path: Path) -> None:
    """The verdict is about the trace as recorded: the finish line, `b` and the summary line measure every
    speed-up against the original lane, not against whichever re-timed tier streams slowest."""
    from tokrace.tui.app.screens.podium import PodiumScreen, finish

    app, base, cmp = race_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        await base.advance_to(200.0)
        app.screen.sample(force=True)
        await pilot.pause()
        row = cmp.rows[0]
        verdict_x = row.original.e2e_s / row.on["Sol ultrafast"].e2e_s
        result = finish(app.runner.race.lanes, loop=True)
        assert (result.winner, result.against, result.reference) == ("Sol ultrafast", "original", True)
        assert result.e2e_x == pytest.approx(verdict_x, abs=1e-3)
        summary = text_of(app.screen.query_one("#summary", Static))
        assert "against original:" in summary
        await pilot.press("b")
        view = app.screen.query_one(BottleneckView)
        ultra = view.rows[2]
        assert ultra.against == "original" and ultra.e2e_speedup == pytest.approx(verdict_x, abs=1e-3)
        assert "speed-ups against original, the trace as recorded" in " ".join(text_of(view.body).split())
        app.push_screen(PodiumScreen(result))
        await pilot.pause()
        note = text_of(app.screen.query_one("#podium-note", Static))
        assert "Sol ultrafast against original, the trace as recorded" in note


async def test_the_replay_bar_says_finished_under_the_finish_line(tmp_path: Path) -> None:
    """One state on one screen: the finish line covers the screen in the frame the race ends, and the replay bar
    (not redrawn under it) must already say finished, not "playing" at the time of its last slow frame."""
    from tokrace.tui.app.screens.podium import PodiumScreen
    from tokrace.tui.app.screens.race import RaceScreen

    app, base, _ = race_app(tmp_path, podium=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.runner.wait_started()
        screen = app.screen
        assert isinstance(screen, RaceScreen) and screen.replay_bar is not None
        await base.advance_to(40.0)
        screen.sample(force=True)
        assert screen.replay_bar._shown.startswith("▶ playing")
        await base.advance_to(200.0)
        screen._frame = 0  # the frame that ends the race is not one of the slow frames that redraw the bar
        screen.sample()
        await pilot.pause()
        assert isinstance(app.screen, PodiumScreen)
        assert screen.replay_bar._shown.startswith("■ finished"), screen.replay_bar._shown
