"""The race screen driven as a person would: every key, every lane state, errors inside lanes, layouts."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Static
from tui_harness import PRICED, LateClock, at, demo_app, failing_demo_tiers, record_demo, replay_app, scripted, text_of

from tokrace.providers.model.events import Delta, Done, Error, Headers, Request, Segment, ToolCall, Usage
from tokrace.providers.model.tiers import TierSpec
from tokrace.tui.app.screens.details import DetailsScreen
from tokrace.tui.app.screens.help import HelpScreen
from tokrace.tui.app.screens.race import RaceScreen
from tokrace.tui.app.widgets.lane import LaneView

STATES_SCRIPT = [
    Request(t=0.0),
    Headers(t=1.0),
    Delta(t=2.0, text="Let me think.", channel="reasoning", tokens=4),
    Delta(t=3.0, text="The answer", tokens=2),
    Delta(t=3.5, text='{"q": "err"}', channel="tool_args", tokens=5),
    ToolCall(t=4.0, id="c1", name="search_logs", arguments='{"q": "err"}'),
    Done(t=4.0, finish_reason="tool_calls"),
    Segment(t=4.0, seg="human", start=4.0, end=6.0, label="approve"),
    Request(t=6.0),
    Delta(t=6.5, text=" is 42.", tokens=3),
    Usage(t=6.5, input=12, output=3),
    Done(t=6.5),
]
"""A two-turn lane that passes through every state: one state per second."""


def badge(app: object, index: int = 0) -> str:
    view = app.screen.query_one(f"#lane-{index}", LaneView)  # type: ignore[attr-defined]
    return view._state


async def test_a_lane_passes_through_every_state_on_its_badge() -> None:
    app, clock = demo_app([scripted("states", STATES_SCRIPT), scripted("idle", [])])
    async with app.run_test(size=(120, 40)) as pilot:
        seen = []
        for t in (0.5, 1.5, 2.5, 3.2, 4.5, 6.2, 7.0):
            await at(pilot, clock, t)
            seen.append(badge(app))
        assert seen == ["connecting", "waiting", "thinking", "streaming", "human", "connecting", "done"]


async def test_tool_call_shows_the_tool_state_and_the_call_in_the_lane() -> None:
    app, clock = demo_app([scripted("tools", STATES_SCRIPT[:7]), scripted("other", [])])
    async with app.run_test(size=(120, 40)) as pilot:
        await at(pilot, clock, 4.5)
        assert badge(app) == "tool"
        assert "→ search_logs" in "".join(text for _, text in app.runner.live.lanes[0].pieces)


async def test_failing_lane_shows_its_error_inside_the_lane_while_others_finish() -> None:
    app, clock = demo_app(failing_demo_tiers())
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 10.0)
        assert [badge(app, i) for i in range(3)] == ["done", "error", "done"]
        error = app.screen.query_one("#lane-1", LaneView).error
        assert error.display and "synthetic failure after 60 tokens" in text_of(error)
        summary = text_of(app.screen.query_one("#summary", Static))
        assert "failed: Sol priority" in summary and "Sol ultrafast finished first" in summary


async def test_a_tier_that_cannot_be_built_fails_in_its_lane_not_the_app() -> None:
    broken = TierSpec(name="broken", provider="nonesuch")
    app, clock = demo_app([broken, *failing_demo_tiers()[:1]])
    async with app.run_test(size=(120, 40)) as pilot:
        await at(pilot, clock, 9.0)
        assert badge(app, 0) == "error"
        assert "unknown provider 'nonesuch'" in (app.runner.live.lanes[0].error or "")
        assert badge(app, 1) == "done"


async def test_s_stops_every_running_lane_and_r_races_again() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 1.0)
        await pilot.press("s")
        await app.runner.wait_finished()
        await at(pilot, clock, 1.0)
        assert [badge(app, i) for i in range(3)] == ["stopped", "stopped", "done"]
        first = app.runner.live
        await pilot.press("r")
        await pilot.pause()
        await app.workers.wait_for_complete()
        assert app.runner.live is not first and app.runner.races == 2
        await at(pilot, clock, 0.1)
        assert badge(app, 0) == "waiting"


async def test_prompt_bar_edits_the_prompt_and_enter_races_it() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 0.5)
        await pilot.press("p")
        prompt = app.screen.query_one("#prompt", Input)
        assert prompt.has_focus
        prompt.value = "Why is the sky blue"
        prompt.cursor_position = len(prompt.value)
        await pilot.press("question_mark", "enter")
        await app.workers.wait_for_complete()
        assert app.runner.request.prompt == "Why is the sky blue?" and app.runner.races == 2
        assert not prompt.has_focus


async def test_an_empty_prompt_is_not_raced() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 0.5)
        await pilot.press("slash")
        app.screen.query_one("#prompt", Input).value = "   "
        await pilot.press("enter")
        await pilot.pause()
        assert app.runner.races == 1


async def test_escape_leaves_the_prompt_so_keys_reach_the_screen_again() -> None:
    app, _clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("p", "escape", "z")
        assert app.focused is None
        assert app.screen.timeline.zoom == 2


async def test_escape_puts_the_raced_prompt_back_so_the_header_shows_what_races() -> None:
    # Reported: p, ctrl+u, type, Escape, r: the header kept the typed text, the race and the recording the old one.
    app, clock = demo_app(prompt="Why?")
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 0.5)
        await pilot.press("p", "ctrl+u", "H", "i", "escape")
        prompt = app.screen.query_one("#prompt", Input)
        assert prompt.value == "Why?" and app.focused is None
        await pilot.press("r")
        await app.workers.wait_for_complete()
        assert app.runner.races == 2 and app.runner.race is not None
        assert prompt.value == app.runner.request.prompt == app.runner.race.request.prompt == "Why?"


async def test_a_prompt_left_any_other_way_is_put_back_too() -> None:
    app, clock = demo_app(prompt="Why?")
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 0.5)
        await pilot.press("p", "ctrl+u", "H", "i")
        app.screen.set_focus(None)  # as a click on a focusable widget or Tab would
        await pilot.pause()
        prompt = app.screen.query_one("#prompt", Input)
        assert not prompt.has_focus and prompt.value == "Why?"


async def test_number_keys_focus_lanes_and_d_opens_that_lanes_details() -> None:
    app, clock = demo_app([*failing_demo_tiers()])
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 10.0)
        await pilot.press("2")
        assert app.screen.query_one("#lane-1").has_class("-focused")
        assert not app.screen.query_one("#lane-0").has_class("-focused")
        await pilot.press("d")
        assert isinstance(app.screen, DetailsScreen) and app.screen.lane.tier.name == "Sol priority"
        body = text_of(app.screen.body)
        assert "ttft_s" in body and "cost_usd" in body
        assert "synthetic failure" in text_of(app.screen.problem)
        await pilot.press("escape")
        assert isinstance(app.screen, RaceScreen)


async def test_details_opened_mid_race_show_what_arrives_after_they_opened() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 0.5)  # standard Sol has not streamed its first token yet
        await pilot.press("d")
        details = app.screen
        assert isinstance(details, DetailsScreen) and details.lane.tier.name == "Sol standard"
        await clock.advance_to(app.runner.race.origin + 10.0)
        details.show()
        assert details.lane.finished and "still running" not in text_of(details.title_bar)
        assert "400" in text_of(details.body) and not details.problem.display


async def test_a_terminal_too_small_for_the_race_scrolls_it_smoothly() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(40, 8)) as pilot:
        await at(pilot, clock, 10.0)
        screen = app.screen
        assert screen.allow_vertical_scroll
        screen.scroll_end(animate=True)  # Textual animates through Widget.animate: no attribute may hide it
        await pilot.pause()
        assert screen.scroll_target_y == screen.max_scroll_y > 0


async def test_a_number_beyond_the_lanes_does_nothing() -> None:
    app, _clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("5")
        assert app.screen.focused_lane == 0


async def test_details_step_through_the_turns_of_a_loop() -> None:
    app, clock = demo_app([scripted("loop", STATES_SCRIPT), scripted("other", [])])
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 7.0)
        await pilot.press("d")
        screen = app.screen
        assert isinstance(screen, DetailsScreen)
        assert "whole loop of 2 turns" in text_of(screen.title_bar)
        assert "amdahl_max_speedup" in text_of(screen.body)
        await pilot.press("right")
        assert "turn 1 of 2 turns" in text_of(screen.title_bar)
        await pilot.press("right")
        assert "turn 2 of 2 turns" in text_of(screen.title_bar)
        assert "amdahl_max_speedup" not in text_of(screen.body)
        await pilot.press("left", "q")
        assert isinstance(app.screen, RaceScreen)


async def test_z_cycles_the_timeline_zoom_from_the_start() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 10.0)
        spans = []
        for _ in range(4):
            spans.append(app.screen.timeline.span)
            await pilot.press("z")
        whole = spans[0]  # the finished race (8.51 s) and room for its end marks
        assert 8.51 < whole < 10.0 and spans == [whole, whole / 2, whole / 4, whole / 8]
        assert app.screen.timeline.zoom == 1


async def test_question_mark_opens_help_listing_the_keys_and_escape_closes_it() -> None:
    app, _clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        for key in ("question_mark", "f1"):
            await pilot.press(key)
            assert isinstance(app.screen, HelpScreen)
            described = dict(app.screen.keys)
            assert described["r"].startswith("race the prompt again") and described["1-6"].startswith("focus")
            assert "space" not in described  # replay keys only in a replay
            await pilot.press("escape")
            assert isinstance(app.screen, RaceScreen)


async def test_q_quits_cleanly() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 1.0)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_ctrl_c_quits_at_once_with_exit_130() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 1.0)
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 130


async def test_command_palette_offers_every_action() -> None:
    app, _clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Race again", "Stop", "Edit the prompt", "Details: Sol ultrafast", "Zoom the timeline",
                      "Help", "Quit"):
            assert title in titles
        [zoom] = [c for c in app.get_system_commands(app.screen) if c.title == "Zoom the timeline"]
        zoom.callback()
        assert app.screen.timeline.zoom == 2
        [details] = [c for c in app.get_system_commands(app.screen) if c.title == "Details: Sol priority"]
        details.callback()
        await pilot.pause()
        assert isinstance(app.screen, DetailsScreen) and app.screen.index == 1


async def test_narrow_terminal_stacks_the_lanes() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await at(pilot, clock, 2.0)
        assert app.screen.has_class("-narrow")
        lanes = [app.screen.query_one(f"#lane-{i}").region for i in range(3)]
        assert lanes[0].x == lanes[1].x == lanes[2].x and lanes[0].y < lanes[1].y < lanes[2].y


async def test_wide_terminal_puts_the_lanes_side_by_side() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 2.0)
        lanes = [app.screen.query_one(f"#lane-{i}").region for i in range(3)]
        assert lanes[0].y == lanes[1].y == lanes[2].y and lanes[0].x < lanes[1].x < lanes[2].x


async def test_finished_lane_shows_markdown_and_its_average_rate() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 2.0)
        fast = app.screen.query_one("#lane-2", LaneView)
        slow = app.screen.query_one("#lane-0", LaneView)
        assert fast.final.display and not fast.tail.display
        assert slow.tail.display and not slow.final.display
        assert fast.gauge.label.startswith("avg ") and not slow.gauge.label.startswith("avg ")
        assert "TTFT 1.07 s" in text_of(slow.stats)


async def test_lane_figures_show_cost_when_the_tier_has_a_price() -> None:
    events = [Request(t=0.0), Delta(t=0.5, text="Hi", tokens=1000), Usage(t=0.5, input=0, output=1000),
              Done(t=0.5)]
    tier = scripted("priced", events)
    tier.price = PRICED
    app, clock = demo_app([tier, scripted("other", [])])
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 1.0)
        assert "$0.0300" in text_of(app.screen.query_one("#lane-0", LaneView).stats)


async def test_an_error_before_any_token_is_shown_in_the_lane() -> None:
    events = [Request(t=0.0), Error(t=0.3, error="http", message="HTTP 401: the key was refused", status=401)]
    app, clock = demo_app([scripted("refused", events), *failing_demo_tiers()[2:]])
    async with app.run_test(size=(120, 40)) as pilot:
        await at(pilot, clock, 1.0)
        view = app.screen.query_one("#lane-0", LaneView)
        assert badge(app) == "error" and "HTTP 401" in text_of(view.error)


async def test_replay_plays_pauses_steps_changes_speed_and_restarts(tmp_path: Path) -> None:
    app, base, control = replay_app(await record_demo(tmp_path / "demo.jsonl"))
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        await base.advance_to(1.2)
        app.screen.sample(force=True)
        assert [badge(app, i) for i in range(3)] == ["streaming", "done", "done"]
        await pilot.press("space")
        assert not control.playing
        paused_at = app.runner.now()
        await base.advance_to(5.0)
        assert app.runner.now() == paused_at
        await pilot.press("full_stop")
        assert app.runner.now() > paused_at and not control.playing
        await pilot.press("plus", "plus")
        assert control.speed == 4.0
        await pilot.press("minus")
        assert control.speed == 2.0
        await pilot.press("space")
        await base.advance_to(20.0)
        app.screen.sample(force=True)
        assert [badge(app, i) for i in range(3)] == ["done", "done", "done"]
        assert "finished" in text_of(app.screen.replay_bar)
        await pilot.press("r")
        await app.workers.wait_for_complete()
        assert app.runner.races == 2 and control.speed == 2.0 and control.playing


async def test_a_paused_replay_says_paused_on_the_status_line_too(tmp_path: Path) -> None:
    app, base, control = replay_app(await record_demo(tmp_path / "demo.jsonl"))
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        await base.advance_to(0.5)
        app.screen.sample(force=True)
        assert app.screen.summary.content.plain.startswith("replaying")  # type: ignore[attr-defined]
        await pilot.press("space")
        app.screen.sample(force=True)
        await pilot.pause()
        assert not control.playing
        assert app.screen.summary.content.plain.startswith("paused")  # type: ignore[attr-defined]


async def test_replay_hides_the_prompt_bar_and_the_race_keys(tmp_path: Path) -> None:
    app, _base, _control = replay_app(await record_demo(tmp_path / "demo.jsonl"))
    async with app.run_test(size=(160, 45)) as pilot:
        assert not app.screen.query("#prompt")
        described = dict(app.screen.key_help())
        assert described["r"].startswith("play the recording again") and "space" in described
        assert "p" not in described
        await pilot.press("p")
        assert app.focused is None


async def test_a_replayed_lane_names_the_provider_it_raced_on(tmp_path: Path) -> None:
    from tokrace.tui.app.widgets.lane import describe_tier

    app, _base, _control = replay_app(await record_demo(tmp_path / "demo.jsonl"))
    async with app.run_test(size=(160, 45)):
        await app.runner.wait_started()
        header = describe_tier(app.runner.live.lanes[0]).plain
        assert "· synthetic" in header and "· replay" not in header


async def test_a_drawing_failure_becomes_one_notification_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: LaneView, now: float, scale: float, slow: bool, text: bool = True) -> None:
        raise ValueError("cannot draw this")

    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        monkeypatch.setattr(LaneView, "sample", broken)
        await at(pilot, clock, 1.0)
        await at(pilot, clock, 2.0)
        assert [n.message for n in app._notifications] == ["ValueError: cannot draw this"]
        assert app.is_running


async def test_the_screens_final_figures_are_benchs_for_the_same_run_even_when_the_loop_is_busy() -> None:
    # Reported: 750 tok/s configured, bench 751.6, the screen's average 676-920 across races: the screen's lanes
    # were stamped when a loop busy drawing woke them, not when their tokens came.
    from tokrace.providers.config.demo import DEMO_MAX_TOKENS, DEMO_PROMPT, demo_tiers
    from tokrace.providers.model.messages import TurnRequest
    from tokrace.providers.runs.session import run_session
    from tokrace.tui.app.widgets.lane import gauge_reading

    bench = await run_session(demo_tiers(), TurnRequest(DEMO_PROMPT, DEMO_MAX_TOKENS), fast_forward=True)
    app, clock = demo_app(clock=LateClock())
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 30.0)
        for lane, runs in zip(app.runner.live.lanes, bench.metrics, strict=True):
            m = runs[0]
            value, label = gauge_reading(lane, 30.0)
            assert value == pytest.approx(m.decode_tok_s, rel=1e-9), lane.tier.name
            assert label == f"avg {m.decode_tok_s:,.0f} tok/s"
            assert (lane.ttft, lane.e2e, lane.tokens) == (pytest.approx(m.ttft_s), pytest.approx(m.e2e_s),
                                                          m.output_tokens)


def test_the_gauge_scale_is_not_blown_up_by_a_tiny_first_span() -> None:
    # Reported: in one race of eight every gauge bar nearly empty (labels 54 / 108 / 736): two tokens a
    # millisecond apart made a decode rate of thousands, and the shared scale followed it.
    from tokrace.providers.race.live import LiveLane
    from tokrace.tui.app.widgets.lane import gauge_peak

    lane = LiveLane(TierSpec(name="a", provider="synthetic"))
    for event in [Request(t=0.0), Delta(t=0.2, text="a", tokens=1), Delta(t=0.201, text="b", tokens=3)]:
        lane.on_event(event)
    assert (lane.decode_rate() or 0) > 2000
    assert gauge_peak(lane, 0.21) <= 40  # 4 tokens in the first 0.1 s (the ramp) is 40 tok/s
