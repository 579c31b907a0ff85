"""A scenario on the race screen: lanes follow the loop through tools and people, the timeline covers the whole loop
(parallel tool calls on rows of their own), and the bottleneck view (b, N with < and >), live and final."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static
from textual.widgets._footer import FooterKey
from tui_harness import at, demo_app, replay_app, text_of

from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.loop.scenario_file import load_scenario
from tokrace.providers.metrics.loop import WHAT_IF_FACTOR, Bottleneck, WhatIf, bottlenecks
from tokrace.providers.model.events import Request
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.race.race import Race
from tokrace.providers.recording import Recorder
from tokrace.providers.timing.clock import VirtualClock
from tokrace.tui.app.screens.help import HelpScreen
from tokrace.tui.app.widgets.bottleneck import BottleneckView, final_loop, shown, step_factor
from tokrace.tui.app.widgets.lane import LaneView, figures


def badge(app: object, index: int) -> tuple[str, str]:
    view = app.screen.query_one(f"#lane-{index}", LaneView)  # type: ignore[attr-defined]
    return view._state, view.lane.detail


def footer_keys(app: object) -> dict[str, str]:
    return {key.key_display or key.key: key.description
            for key in app.screen.query(FooterKey)}  # type: ignore[attr-defined]


def view(app: object) -> BottleneckView:
    return app.screen.query_one(BottleneckView)  # type: ignore[attr-defined]


async def test_every_lane_follows_the_loop_through_tools_people_and_waits() -> None:
    # The incident on ultrafast: two parallel queries until 2.62 s, a person from 4.97 to 60.80 s, the rollback
    # tool until 89.11 s, a 60 s wait for traffic to settle, the loop's end at 151.83 s. Standard is still going.
    app, clock = demo_app(scenario="incident")
    async with app.run_test(size=(160, 45)) as pilot:
        seen = []
        for t in (1.0, 30.0, 70.0, 120.0, 152.0):
            await at(pilot, clock, t)
            seen.append(badge(app, 2))
        assert seen == [("tool", "query_logs, query_metrics"), ("human", "on-call approves the rollback"),
                        ("tool", "rollback"), ("waiting", "traffic settles on the old version"), ("done", "")]
        assert badge(app, 0) == ("waiting", "traffic settles on the old version")
        ultrafast, standard = app.runner.live.lanes[2], app.runner.live.lanes[0]
        assert (ultrafast.finished, standard.finished) == (True, False)
        assert figures(ultrafast, 152.0) == f"TTFT 0.18 s · {ultrafast.tokens:,} tok · 151.83 s · $—"
        requests = [e for e in app.runner.race.lanes[2].events if isinstance(e, Request)]
        assert len(ultrafast.turns) == len(requests) == 8
        assert ultrafast.tokens == sum(turn.tokens() for turn in ultrafast.turns)


async def test_an_incident_stopped_during_the_approval_keeps_the_whole_loop_on_screen() -> None:
    # Reported: stopped at 60 s during a 55.8 s human wait, the axis ended near 19 s and a lane said 13.82 s
    # (the end of its last model turn, not of the loop).
    app, clock = demo_app(scenario="incident")
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 60.0)
        await pilot.press("s")
        await app.runner.wait_finished()
        await at(pilot, clock, 90.0)  # time goes on after the stop: nothing grows
        timeline = app.screen.timeline
        assert 60.0 <= timeline.span <= 90.0
        for index, lane in enumerate(app.runner.live.lanes):
            assert badge(app, index)[0] == "stopped"
            assert lane.e2e == pytest.approx(60.0) and " · 60.00 s · " in figures(lane, 90.0)
            human = [s for s in lane.segments(90.0) if s.kind == "human"]
            assert human and human[-1].end == pytest.approx(60.0)
        row = timeline.render_line(0).text
        assert "■ 60.00 s" in row and "█" * 40 in row  # the approval drawn up to the stop, 40 s and more of it
        summary = text_of(app.screen.query_one("#summary", Static))
        assert summary.startswith("no lane finished · stopped: Sol standard, Sol priority, Sol ultrafast")


async def test_the_timeline_draws_parallel_tool_calls_on_a_row_of_their_own() -> None:
    app, clock = demo_app(scenario="incident")
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 3.0)
        rows = app.screen.timeline.rows
        assert [(row.lane, row.track) for row in rows] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
        assert [s.label for s in rows[5].spans] == ["query_metrics", "query_metrics"]  # two turns, two pairs
        assert "└ parallel" in app.screen.timeline.render_line(5).text
        assert app.screen.timeline.size.height == len(rows) + 1


async def test_b_shows_the_bottleneck_view_instead_of_the_lanes_and_b_again_leaves_it() -> None:
    app, clock = demo_app(scenario="coding-loop")
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 1.0)
        assert footer_keys(app)["b"] == "Bottlenecks" and "< >" not in footer_keys(app)
        await pilot.press("b")
        assert view(app).display and not app.screen.query_one("#lanes").display
        assert footer_keys(app)["< >"] == "N×"
        await pilot.press("b")
        assert not view(app).display and app.screen.query_one("#lanes").display


async def test_the_bottleneck_view_is_live_while_racing_and_final_at_the_end() -> None:
    app, clock = demo_app(scenario="coding-loop")
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 40.0)
        await pilot.press("b")
        bn = view(app)
        shown = text_of(bn.body)
        assert not bn.final and "so far, 40.0 s in" in shown
        live = [lane.loop_so_far(40.0) for lane in app.runner.live.lanes]
        assert [b.e2e_s for b in bn.rows] == [pytest.approx(40.0)] * 3
        assert [b.model_share for b in bn.rows] == [m.model_share for m in live]
        assert "speed-up e2e | tok/s" in shown  # nobody has finished: nothing to compare yet

        await at(pilot, clock, 90.0)  # ultrafast is over, the others are not: still nothing to compare with
        assert app.runner.live.lanes[2].finished and not bn.final
        assert [(b.e2e_speedup, b.token_speedup) for b in bn.rows] == [(None, None)] * 3
        assert "speed-up e2e | tok/s" in text_of(bn.body) and "vs Sol ultrafast" not in text_of(bn.body)

        await at(pilot, clock, 200.0)
        shown = text_of(bn.body)
        race = app.runner.race
        assert bn.final and "final" in shown and race is not None
        expected = bottlenecks([(run.tier.name, final_loop(run.events, run.tier)) for run in race.lanes])
        assert bn.rows == expected
        standard, _, ultrafast = bn.rows
        assert ultrafast.token_speedup == pytest.approx(14, rel=0.05) and ultrafast.e2e_speedup < 2
        for b in bn.rows:
            assert sum(s for _, s, _ in b.parts) == pytest.approx(b.e2e_s, abs=0.001)
        assert (f"Sol ultrafast streams {ultrafast.token_speedup:.1f}× faster than Sol standard but finishes the "
                f"loop {ultrafast.e2e_speedup:.2f}× sooner") in shown
        # it says what it scales, so a raced tier with another TTFT does not contradict it (issue 26 row 4)
        assert (f"a model 14× faster (its time to first token and its token rate alike) would finish this loop in "
                f"{standard.what_if.e2e_s:.1f} s ({standard.what_if.sooner_pct:.0f}% sooner)") in shown
        assert "speed-ups against Sol standard, the finished lane with the slowest token rate" in shown


async def test_angle_brackets_change_n_of_the_what_if_only_while_the_view_is_shown() -> None:
    app, clock = demo_app(scenario="incident")
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 200.0)
        await pilot.press("greater_than_sign")
        assert app.screen.bottlenecks is None  # never shown (so not made yet): the key does nothing
        await pilot.press("b")
        bn = view(app)
        assert bn.factor == WHAT_IF_FACTOR
        await pilot.press("greater_than_sign")
        assert bn.factor == 20 and "model 20× faster" in text_of(bn.body)
        assert all(b.what_if.factor == 20 for b in bn.rows)
        await pilot.press("less_than_sign", "less_than_sign")
        assert bn.factor == 10
        standard = bn.rows[0]
        assert f"would finish this loop in {standard.what_if.e2e_s:.1f} s" in text_of(bn.body)


def test_the_view_leaves_out_the_microseconds_between_steps_but_never_the_model() -> None:
    b = Bottleneck(name="lane", ok=True, e2e_s=10.0, parts=(("model", 0.0, 0.0), ("wait", 0.00002, 0.0),
                                                           ("tool", 10.0, 1.0)),
                   model_parts={}, model_s=0.0, model_share=0.0, amdahl_max_speedup=1.0,
                   what_if=WhatIf(14, 10.0, 0.0, 0.0), decode_tok_s=None)
    assert [part for part, _, _ in shown(b)] == ["model", "tool"]


def test_n_steps_along_a_ladder_and_stays_at_its_ends() -> None:
    assert [step_factor(14, 1), step_factor(14, -1), step_factor(1.5, -1), step_factor(1000, 1)] == [20, 10, 1.5, 1000]


async def test_a_single_prompt_is_a_loop_of_one_turn_in_the_bottleneck_view() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 10.0)
        await pilot.press("b")
        bn = view(app)
        shown = text_of(bn.body)
        assert bn.final and "one prompt (a loop of one turn)" in shown
        assert all(b.ok and b.model_share == pytest.approx(1.0) and b.amdahl_max_speedup is None for b in bn.rows)
        # Reported: "the model is 100 % of the turn; the model is all of it" (say it once, well).
        assert "the model is all of the turn: nothing else holds it up" in shown and "finish this turn in" in shown
        assert "the model is 100%" not in shown and "all of it" not in shown
        assert bn.rows[2].token_speedup == pytest.approx(14, rel=0.05)


async def test_help_and_the_command_palette_offer_the_bottleneck_view() -> None:
    app, _clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Bottlenecks" in titles and "What if: a faster model" not in titles
        [command] = [c for c in app.get_system_commands(app.screen) if c.title == "Bottlenecks"]
        command.callback()
        assert view(app).display
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "What if: a faster model" in titles and "What if: a slower model" in titles
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        described = dict(app.screen.keys)
        assert described["b"].startswith("the bottleneck view") and "what if" in described["< >"]


async def test_the_summary_says_loop_for_a_scenario() -> None:
    app, clock = demo_app(scenario="incident")
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 200.0)
        summary = text_of(app.screen.query_one("#summary", Static))
        assert "Sol ultrafast finished first in 151.83 s" in summary and "× loop" in summary


async def test_a_replayed_loop_reads_its_scenario_from_the_header_and_ends_at_the_loop_end(tmp_path: Path) -> None:
    scenario = load_scenario("incident")
    path = tmp_path / "incident.jsonl"
    recorder = Recorder(path, scenario.first_prompt(), demo_tiers(), scenario=scenario.name)
    clock = VirtualClock()
    raced = Race(demo_tiers(), TurnRequest(scenario.first_prompt(), 400), clock, [recorder], scenario=scenario)
    await clock.drive(raced.run())
    recorder.close()
    app, base, _control = replay_app(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        await base.advance_to(30.0)
        app.screen.sample(force=True)
        assert app.runner.loop_name == "incident" and all(lane.loop for lane in app.runner.live.lanes)
        assert badge(app, 2) == ("human", "on-call approves the rollback")
        await base.advance_to(200.0)
        await pilot.press("b")
        bn = view(app)
        assert bn.final and "where the time goes — incident · final" in text_of(bn.body)
        live = bottlenecks([(run.tier.name, final_loop(run.events, run.tier)) for run in raced.lanes])
        assert [(b.e2e_s, b.parts) for b in bn.rows] == [(pytest.approx(b.e2e_s), b.parts) for b in live]


async def test_a_stopped_loop_is_not_reported_as_final_and_compares_nothing() -> None:
    # Reported: b, then s after ~20 s of the incident: the header said "final" and the punchline "finishes the loop
    # 1.00× sooner", with 1.00× for every lane.
    app, clock = demo_app(scenario="incident")
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 20.7)
        await pilot.press("b")
        await pilot.press("s")
        await app.runner.wait_finished()
        await at(pilot, clock, 25.0)
        bn = view(app)
        shown = text_of(bn.body)
        assert "final" not in shown and "stopped at 20.7 s" in shown
        assert [(b.ok, b.e2e_speedup, b.token_speedup) for b in bn.rows] == [(False, None, None)] * 3
        assert "sooner" not in shown and "1.00×" not in shown
        assert "would finish this loop" not in shown and "until it was stopped" in shown


async def test_a_stopped_lane_is_left_out_of_the_comparison_of_those_that_finished() -> None:
    app, clock = demo_app(scenario="coding-loop")
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 100.0)  # ultrafast has finished, the others have not
        await pilot.press("b")
        await pilot.press("s")
        await app.runner.wait_finished()
        await at(pilot, clock, 101.0)
        bn = view(app)
        shown = text_of(bn.body)
        standard, priority, ultrafast = bn.rows
        assert ultrafast.ok and not standard.ok and not priority.ok
        assert standard.e2e_speedup is None and priority.e2e_speedup is None
        assert "stopped at 100.0 s" in shown and "final" not in shown
        assert "finishes the loop" not in shown  # one lane finished: nothing to compare it with
        # ...and the fastest lane is never named as the one with the slowest token rate (issue 26 row 6)
        assert ultrafast.e2e_speedup is None and "vs Sol ultrafast" not in shown
        assert "slowest token rate" not in shown


async def test_the_time_axis_of_a_finished_loop_fits_the_loop() -> None:
    # Reported: the coding-loop time axis ran to 165 s for a 127 s loop.
    app, clock = demo_app(scenario="coding-loop")
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 400.0)
        assert app.runner.live.finished
        longest = max(lane.e2e or 0.0 for lane in app.runner.live.lanes)
        span = app.screen.timeline.span
        assert longest < span <= longest * 1.1
        axis = app.screen.timeline.render_line(len(app.screen.timeline.lines())).text
        last = max(int(label.strip().removesuffix(" s")) for label in axis.split("▏")[1:] if label.strip())
        assert last <= span
        row = app.screen.timeline.render_line(0).text
        assert row.rstrip().endswith(f"{app.runner.live.lanes[0].e2e:.2f} s")  # its end mark and time still fit
