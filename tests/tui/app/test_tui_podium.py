"""The finish line (a podium over the lanes when a race ends) and the presenter's view (issue 11)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Digits
from tui_harness import at, factory, failing_demo_tiers, text_of

from tokrace.providers.config.demo import DEMO_MAX_TOKENS, DEMO_PROMPT, demo_tiers
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.race import Race
from tokrace.providers.runs.session import lane_metrics
from tokrace.providers.timing.clock import VirtualClock
from tokrace.tui import main as cli
from tokrace.tui.app.app import TokraceApp, build_app
from tokrace.tui.app.screens.podium import PodiumScreen, finish, times
from tokrace.tui.app.screens.race import RaceScreen
from tokrace.tui.app.widgets.footer import RaceFooter


def app_with(tiers: list[TierSpec] | None = None, *, podium: bool = True, present: bool = False,
             scenario: str | None = None) -> tuple[TokraceApp, VirtualClock]:
    from tokrace.providers.loop.scenario_file import load_scenario

    loop = load_scenario(scenario) if scenario else None
    clock = VirtualClock()
    request = TurnRequest(loop.first_prompt() if loop else DEMO_PROMPT, DEMO_MAX_TOKENS)
    app = build_app(tiers or demo_tiers(), request, clock_factory=lambda: clock, provider_factory=factory,
                    animate=False, freeze_gc=False, podium=podium, present=present, scenario=loop)
    return app, clock


async def bench_lanes(tiers: list[TierSpec]) -> list[Any]:
    clock = VirtualClock()
    race = Race(tiers, TurnRequest(DEMO_PROMPT, DEMO_MAX_TOKENS), clock)
    return await clock.drive(race.run())


async def test_the_podium_ranks_the_lanes_with_benchs_figures() -> None:
    lanes = await bench_lanes(demo_tiers())
    metrics = [lane_metrics(lane) for lane in lanes]
    result = finish(lanes)
    assert [p.name for p in result.places] == ["Sol ultrafast", "Sol priority", "Sol standard"]
    assert [p.rank for p in result.places] == [1, 2, 3]
    assert [p.e2e_s for p in result.places] == [metrics[2].e2e_s, metrics[1].e2e_s, metrics[0].e2e_s]
    assert result.winner == "Sol ultrafast" and result.against == "Sol standard"
    assert result.e2e_x == pytest.approx(metrics[0].e2e_s / metrics[2].e2e_s)  # type: ignore[operator]
    assert result.tokens_x == pytest.approx(metrics[2].decode_tok_s / metrics[0].decode_tok_s)  # type: ignore[operator]
    assert (times(result.e2e_x or 0), times(result.tokens_x or 0)) == ("12x", "14x")


async def test_a_failed_lane_is_ranked_without_a_time_and_left_out_of_the_speed_up() -> None:
    lanes = await bench_lanes(failing_demo_tiers())
    result = finish(lanes)
    assert [(p.name, p.rank, p.note) for p in result.places] == [
        ("Sol ultrafast", 1, ""), ("Sol standard", 2, ""), ("Sol priority", None, "failed")]
    assert result.against == "Sol standard" and result.places[2].e2e_s is None


def test_one_finisher_gets_no_speed_up_and_small_ones_keep_a_decimal() -> None:
    assert times(1.6) == "1.6x" and times(9.96) == "10x" and times(14.04) == "14x"
    assert finish([]).winner is None


async def test_the_podium_shows_when_the_race_ends_and_any_key_puts_the_race_back() -> None:
    app, clock = app_with()
    async with app.run_test(size=(80, 24)) as pilot:
        await at(pilot, clock, 3.0)
        assert isinstance(app.screen, RaceScreen)
        await at(pilot, clock, 10.0)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PodiumScreen)
        assert [d.value for d in screen.query(Digits)] == ["12x", "14x"]
        assert "Sol ultrafast wins" in text_of(screen.query_one("#podium-winner"))
        ranking = text_of(screen.query_one("#podium-ranking"))
        assert ranking.index("Sol ultrafast") < ranking.index("Sol priority") < ranking.index("Sol standard")
        assert "0.71 s" in ranking and "8.51 s" in ranking
        await pilot.press("d")  # any key: dismisses, does nothing else
        assert isinstance(app.screen, RaceScreen)
        await pilot.press("d")
        assert not isinstance(app.screen, RaceScreen)  # now the key is the race screen's own (details)


async def test_the_podium_shows_again_after_the_next_race_and_never_for_a_stopped_one() -> None:
    app, clock = app_with()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 10.0)
        await pilot.press("x")
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await at(pilot, clock, 1.0)
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await at(pilot, clock, 2.0)
        assert isinstance(app.screen, RaceScreen)


async def test_no_podium_when_asked() -> None:
    app, clock = app_with(podium=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await at(pilot, clock, 10.0)
        await pilot.pause()
        assert isinstance(app.screen, RaceScreen)


async def test_a_loops_podium_speaks_of_the_whole_loop() -> None:
    app, clock = app_with(scenario="incident")
    async with app.run_test(size=(160, 45)) as pilot:
        while app.runner.running or not app.runner.races:
            await clock.advance(5.0)
        await at(pilot, clock, 400.0)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PodiumScreen)
        assert "faster the whole loop" in " ".join(text_of(w) for w in screen.query(".podium-words"))


async def test_present_shows_gauges_and_final_times_and_hides_text_notices_and_footer(tmp_path: Path) -> None:
    app, clock = app_with(podium=False, present=True)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await at(pilot, clock, 10.0)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RaceScreen) and screen.has_class("-present")
        for view in screen.views:
            assert not view.tail.display and not view.final.display
            assert view.gauge.size.height == 3
            assert text_of(view.badge).strip() == f"✓ {view.lane.e2e:.2f}\u00a0s"  # never split from its unit
        assert not screen.query_one(RaceFooter).display or screen.query_one(RaceFooter).region.height == 0
        app.notify("recorded to somewhere", title="Recorded")
        await at(pilot, clock, 10.5)
        assert not screen.query_one("#notice").display


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the screen was opened with (the app is built, never run)."""
    seen: dict[str, Any] = {}

    def run(self: TokraceApp) -> None:
        seen["app"] = self

    monkeypatch.setattr(TokraceApp, "run", run)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    return seen


@pytest.mark.parametrize(("argv", "theme", "present", "podium"), [
    (["demo", "--no-record"], "tokrace-dark", False, True),
    (["demo", "--no-record", "--present"], "projector", True, True),
    (["demo", "--no-record", "--present", "--theme", "tokrace-cb"], "tokrace-cb", True, True),
    (["demo", "--no-record", "--no-podium"], "tokrace-dark", False, False),
    (["--present", "--no-record"], "projector", True, True),
])
def test_the_command_line_opens_the_presenters_view_on_the_projector_theme(
        opened: dict[str, Any], in_tmp: Path, argv: list[str], theme: str, present: bool, podium: bool) -> None:
    assert cli.main(argv) == 0
    app = opened["app"]
    assert (app.themes.start, app.present, app.podium) == (theme, present, podium)


def test_a_replay_takes_the_presenters_options(opened: dict[str, Any], in_tmp: Path) -> None:
    path = in_tmp / "demo.jsonl"
    assert cli.main(["bench", "--fast-forward", "--record", str(path), "--json", str(in_tmp / "out.json")]) == 0
    assert cli.main(["replay", str(path), "--present", "--no-podium"]) == 0
    app = opened["app"]
    assert (app.themes.start, app.present, app.podium) == ("projector", True, False)


def test_bench_refuses_the_presenters_options(capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--present", "bench"])
    assert "--present does not apply to `tokrace bench`" in capsys.readouterr().err



async def test_on_a_tall_terminal_the_speed_ups_are_in_five_row_type() -> None:
    from tokrace.tui.app.widgets.big_digits import BigDigits, big

    assert big("12x") == [" ██   █████    ", "  █       █ █ █", "  █   █████  █ ",
                          "  █   █     █ █", " ███  █████    "]
    app, clock = app_with()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 10.0)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PodiumScreen)
        shown = [w for w in screen.query(BigDigits) if w.display]
        assert [w.value for w in shown] == ["12x", "14x"] and all(w.size.height == 5 for w in shown)
        assert not any(d.display for d in screen.query(Digits))
