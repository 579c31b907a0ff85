"""The replay screen with an idle cap or another speed: the figures are the recording's, and every lane and the
summary say how the replay departs from real time (issue 11)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from tui_harness import text_of

from tokrace.providers.adapters.replay import replay_tiers
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.recording import read_recording
from tokrace.providers.runs.replay_control import ReplayControl, replay_duration
from tokrace.providers.timing.clock import VirtualClock
from tokrace.tui.app.app import TokraceApp, build_app
from tokrace.tui.app.widgets.lane import LaneView
from tokrace.tui.main import main


@pytest.fixture(scope="module")
def coding_loop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("loop") / "coding.jsonl"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["bench", "--scenario", "coding-loop", "--fast-forward", "--record", str(path)]) == 0
    return path


def paced_app(path: Path, speed: float = 1.0, idle_cap: float | None = None
              ) -> tuple[TokraceApp, VirtualClock, ReplayControl]:
    recording = read_recording(path)
    base = VirtualClock()
    control = ReplayControl(path, replay_duration(recording), speed, base=lambda: base, recording=recording,
                            idle_cap=idle_cap)
    app = build_app(replay_tiers(recording), TurnRequest(recording.prompt), replay=control, animate=False,
                    freeze_gc=False)
    return app, base, control


def paces(app: TokraceApp) -> list[str]:
    return [text_of(view.pace).strip() if view.pace.display else "" for view in app.screen.query(LaneView)]


async def test_a_capped_replay_of_the_coding_loop_ends_with_the_live_speed_up(coding_loop: Path) -> None:
    app, base, _control = paced_app(coding_loop, idle_cap=1.0)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        await base.advance_to(100.0)  # 127 s of loop, its long tool and review pauses played in 1 s each
        app.screen.sample(force=True)
        assert app.runner.live.finished
        summary = text_of(app.screen.summary)
        # Live: Sol standard 127.04 s, Sol ultrafast 79.57 s: 1.6× on the loop (capped per lane it said 3.3×).
        assert "Sol ultrafast 14.1× tokens 1.6× loop" in summary
        assert "replay idle ≤1 s" in summary and "figures as recorded" in summary
        assert paces(app) == ["idle ≤1 s"] * 3
        assert "idle pauses played in ≤1 s" in text_of(app.screen.replay_bar)
        assert "127.04 s / 127.04 s" in text_of(app.screen.replay_bar)
        await pilot.press("b")  # the bottleneck view: the live loop's Amdahl bound, not the capped one's
        app.screen.sample(force=True)
        view = text_of(app.screen.bottlenecks.body)
        assert "1.75×" in view and "5.01×" not in view  # capped per lane, it said 5.01×


async def test_a_sped_up_or_stepped_replay_says_so_on_every_lane(coding_loop: Path) -> None:
    app, base, _control = paced_app(coding_loop)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        await base.advance_to(0.5)
        app.screen.sample(force=True)
        assert paces(app) == ["", "", ""]
        assert "replay" not in text_of(app.screen.summary).split("·")[-1]
        await pilot.press("plus")
        app.screen.sample(force=True)
        assert paces(app) == ["×2"] * 3 and "replay ×2" in text_of(app.screen.summary)
        await pilot.press("full_stop")
        app.screen.sample(force=True)
        assert paces(app) == ["×2 stepped"] * 3
