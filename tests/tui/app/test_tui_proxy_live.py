"""The live proxy screen, driven by a scripted session on the virtual clock: a lane per session lane as its calls
happen, the timeline with the --on tier's re-timed session beside it, the breakdown and the verdict so far; no key
the agent's text carries ever shows (snapshots: update with --snapshot-update)."""

from __future__ import annotations

from collections.abc import Callable

from proxying import scripted_session
from textual.pilot import Pilot

from tokrace.providers.proxy.live import LiveProxy
from tokrace.providers.proxy.session import ProxySession
from tokrace.providers.traces.retime import TierProfile
from tokrace.tui.app.proxy_app import ProxyApp
from tokrace.tui.app.screens.proxy import ProxyScreen, breakdown_line, duration

WIDE = (160, 45)
SMALL = (80, 24)
FAST = TierProfile(name="Sol ultrafast", ttft_s=0.2, tok_s=400.0)
HEADING = "tokrace proxy · http://127.0.0.1:8787"

Compare = Callable[..., bool]


def session_app(until: float) -> ProxyApp:
    """The screen after ``until`` seconds of the scripted session, its events masked as the proxy masks them."""
    live = LiveProxy([FAST])
    session = ProxySession.__new__(ProxySession)  # only its masker: what the screen is handed
    from tokrace.providers.model.masking import Masker

    session.masker = Masker()
    for lane, event in scripted_session(until):
        live(lane, session.masker(event))
    return ProxyApp(live, lambda: until, None, HEADING, animate=False)


async def sampled(pilot: Pilot[object]) -> None:
    screen = pilot.app.screen
    assert isinstance(screen, ProxyScreen)
    screen.sample(force=True)
    await pilot.pause()
    screen.sample(force=True)
    await pilot.pause()


def test_a_live_session_wide(snap_compare: Compare) -> None:
    assert snap_compare(session_app(30.0), terminal_size=WIDE, run_before=sampled)


def test_a_live_session_80x24(snap_compare: Compare) -> None:
    assert snap_compare(session_app(30.0), terminal_size=SMALL, run_before=sampled)


def test_before_the_first_call_the_screen_says_how_to_point_an_agent_at_it(snap_compare: Compare) -> None:
    app = ProxyApp(LiveProxy([FAST]), lambda: 0.0, None, HEADING, "  Claude Code   ANTHROPIC_BASE_URL=http://"
                   "127.0.0.1:8787 claude", animate=False)
    assert snap_compare(app, terminal_size=SMALL, run_before=sampled)


async def test_the_screen_shows_the_verdict_and_never_a_key_the_agent_wrote() -> None:
    app = session_app(30.0)
    async with app.run_test(size=WIDE) as pilot:
        await sampled(pilot)  # type: ignore[arg-type]
        screen = app.screen
        assert isinstance(screen, ProxyScreen)
        shown = app.export_screenshot()
        verdict = str(screen.verdicts.render())
        assert verdict.startswith("on Sol ultrafast this session would be at ")
        assert "sk-canary" not in shown
        lanes = [view.lane for view in screen.views]
        assert all("sk-canary" not in lane.answer_text() for lane in lanes)
        assert "[redacted]" in screen.live.lanes[0].answer_text()


def test_durations_and_the_breakdown_read_as_a_person_reads_them() -> None:
    assert [duration(s) for s in (4.04, 125.0, 3725.0)] == ["4.0 s", "2 min 05 s", "1 h 02 min"]
    live = LiveProxy()
    for lane, event in scripted_session(30.0):
        live(lane, event)
    line = breakdown_line(live, 30.0)
    assert line.startswith("so far: model ") and "tool 4.0 s" in line and "human 6.0 s" in line
    assert "4 calls · 36,000 in / " in line
