""""Export…" on the screen: the race written beside its recording, said where; refused while racing or unrecorded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import OptionList
from tui_harness import factory, record_demo, replay_app

from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.runs.record_paths import RecordPlan
from tokrace.providers.timing.clock import VirtualClock
from tokrace.tui.app.app import TokraceApp, build_app
from tokrace.tui.app.screens.export import ExportScreen
from tokrace.tui.app.screens.race import RaceScreen


def recording_app(plan: RecordPlan | None) -> tuple[TokraceApp, VirtualClock]:
    clock = VirtualClock()
    app = build_app(demo_tiers(), TurnRequest("Why?", 30), clock_factory=lambda: clock, provider_factory=factory,
                    animate=False, freeze_gc=False, record=plan)
    return app, clock


def notes(app: TokraceApp) -> list[tuple[str, str]]:
    return [(n.title, n.message) for n in app._notifications]


async def pick(app: TokraceApp, pilot: Pilot[int], fmt: str) -> None:
    """Open "Export…" and choose one format."""
    screen = app.screen
    assert isinstance(screen, RaceScreen)
    before = {n.identity for n in app._notifications}
    screen.action_export()
    await pilot.pause()
    picker = app.screen
    assert isinstance(picker, ExportScreen)
    options = picker.query_one(OptionList)
    options.highlighted = next(i for i in range(options.option_count) if options.get_option_at_index(i).id == fmt)
    options.action_select()
    for _ in range(3000):  # the export runs on a thread, or a process: let it finish
        await pilot.pause(0.01)
        if any(n.title in ("Exported", "Export failed") for n in app._notifications if n.identity not in before):
            return


async def test_export_writes_beside_the_races_recording_and_says_where(tmp_path: Path) -> None:
    path = tmp_path / "talk.jsonl"
    app, clock = recording_app(RecordPlan(path))
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        while app.runner.running:
            await clock.advance(0.5)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RaceScreen)
        assert any(title == "Export…" for title, _, _ in screen.commands())
        await pick(app, pilot, "markdown")
        await pilot.pause()
        assert ("Exported", f"exported to {tmp_path / 'talk.md'}") in notes(app)
        assert "| tier | model | TTFT |" in (tmp_path / "talk.md").read_text(encoding="utf-8")
        await pick(app, pilot, "svg")
        await pilot.pause()
        assert (tmp_path / "talk.svg").read_text(encoding="utf-8").startswith("<svg")
        await pick(app, pilot, "cast")  # drawn by `tokrace export` in a process of its own
        await pilot.pause()
        assert ("Exported", f"exported to {tmp_path / 'talk.cast'}") in notes(app)
        assert json.loads((tmp_path / "talk.cast").read_text(encoding="utf-8").splitlines()[0])["version"] == 3


async def test_nothing_to_export_while_racing_or_without_a_recording() -> None:
    app, clock = recording_app(None)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        screen = app.screen
        assert isinstance(screen, RaceScreen)
        await clock.advance(0.1)
        screen.action_export()
        await pilot.pause()
        assert ("Nothing to export", "the race is still running: export it once it ends") in notes(app)
        while app.runner.running:
            await clock.advance(0.5)
        screen.action_export()
        await pilot.pause()
        assert any("was not recorded (--no-record)" in message for _, message in notes(app))
        assert not isinstance(app.screen, ExportScreen)


def picker_at_the_end(tmp_path: Path) -> tuple[TokraceApp, Callable[[Pilot[object]], Awaitable[None]]]:
    """A replayed demo race at its end with "Export…" opened."""
    app, base, _control = replay_app(asyncio.run(record_demo(tmp_path / "demo.jsonl")))

    async def run_before(pilot: Pilot[object]) -> None:
        await app.runner.wait_started()
        await base.advance_to(30.0)
        screen = app.screen
        assert isinstance(screen, RaceScreen)
        screen.sample(force=True)
        await pilot.pause()
        screen.action_export()
        await pilot.pause()

    return app, run_before


def test_the_export_picker_wide(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    app, run_before = picker_at_the_end(tmp_path)
    assert snap_compare(app, terminal_size=(160, 45), run_before=run_before)


def test_the_export_picker_80x24(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    app, run_before = picker_at_the_end(tmp_path)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_a_replayed_trace_is_exported_beside_the_trace_not_its_temporary_recording(tmp_path: Path) -> None:
    from tokrace.providers.traces.read import read_file
    from tokrace.providers.traces.to_events import write_recording
    from tokrace.tui.app.screens.export import beside
    from tokrace.tui.main import main

    race = asyncio.run(record_demo(tmp_path / "race.jsonl"))
    assert beside(race) == race
    trace = tmp_path / "agent.otlp.json"
    assert main(["export", str(race), "--to", "otlp", "-o", str(trace)]) == 0
    (tmp_path / "tmp").mkdir()
    played = write_recording(list(read_file(trace).traces), tmp_path / "tmp" / "agent.jsonl")
    assert beside(played) == trace
