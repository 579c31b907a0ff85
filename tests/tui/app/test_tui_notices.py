"""Notices hide nothing: "Recorded" at every finish and the broken-theme notice at start go on the notice line
above the footer, never over the summary or the lanes (issue 11)."""

from __future__ import annotations

from pathlib import Path

from textual.geometry import Region
from textual.widget import Widget
from textual.widgets._toast import Toast, ToastRack
from tui_harness import factory, text_of

from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.runs.record_paths import RecordPlan
from tokrace.providers.timing.clock import VirtualClock
from tokrace.themes.loader import user_themes_dir
from tokrace.tui.app.app import TokraceApp, build_app


def app_on_virtual_time(plan: RecordPlan | None = None) -> tuple[TokraceApp, VirtualClock]:
    clock = VirtualClock()
    app = build_app(demo_tiers(), TurnRequest("Why?", 60), clock_factory=lambda: clock, provider_factory=factory,
                    animate=False, freeze_gc=False, record=plan)
    return app, clock


def covers(app: TokraceApp, region: Region, *widgets: Widget) -> bool:
    return any(widget.region.overlaps(region) for widget in widgets)


def toasts_shown(app: TokraceApp) -> bool:
    return any(rack.display and rack.region.area for rack in app.screen.query(ToastRack))


async def test_the_recorded_notice_is_on_its_own_line_and_covers_nothing(tmp_path: Path) -> None:
    app, clock = app_on_virtual_time(RecordPlan(tmp_path / "talk.jsonl"))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await app.runner.wait_started()
        while app.runner.running:
            await clock.advance(0.5)
        await app.runner.wait_finished()
        app.screen.sample(force=True)
        await pilot.pause()
        screen = app.screen
        notice = screen.query_one("#notice")
        # never the absolute path on a screen an audience may see (issue 26 row 15)
        assert (notice.display and "Recorded: talk.jsonl" in text_of(notice)) or \
            f"Recorded: ~/{(tmp_path / 'talk.jsonl').relative_to(Path.home())}" in text_of(notice)
        assert str(tmp_path) not in text_of(notice)
        assert not toasts_shown(app)
        assert not covers(app, notice.region, screen.summary, screen.timeline, *screen.views)
        assert "finished first" in text_of(screen.summary)


async def test_a_broken_theme_is_noticed_without_covering_the_lanes() -> None:
    folder = user_themes_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "broken.toml").write_text('name = "broken"\n', encoding="utf-8")
    app, clock = app_on_virtual_time()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await app.runner.wait_started()
        await clock.advance(0.5)
        app.screen.sample(force=True)
        await pilot.pause()
        screen = app.screen
        notice = screen.query_one("#notice")
        assert notice.display and "Themes:" in text_of(notice) and "broken.toml" in text_of(notice)
        assert not toasts_shown(app)
        assert not covers(app, notice.region, *screen.views, screen.timeline, screen.summary)


async def test_no_toast_is_ever_displayed_even_when_textual_shows_its_rack() -> None:
    # Reported: on a real terminal the "Recorded" toast covered the timeline for ~5 s: the toast rack sets its own
    # display when a notification comes, which no stylesheet rule on the rack outranks.
    app, _clock = app_on_virtual_time()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await app.runner.wait_started()
        app.notify("recorded to somewhere", title="Recorded")
        await pilot.pause()
        await pilot.pause()
        toasts = list(app.screen.query(Toast))
        assert toasts and not any(toast.display for toast in toasts)
