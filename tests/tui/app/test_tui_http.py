"""The race screen over real loopback HTTP: the three protocols as lanes beside a lane that fails, the service tier
asked for beside the one the server reports, the details of what came over the wire, and provider text (errors,
tier names) drawn as it is, never read as markup."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from serving import base_url, fast_source, provider
from textual.content import Content
from textual.pilot import Pilot
from textual.widgets import Static
from tui_harness import text_of

from tokrace.providers.adapters import Provider
from tokrace.providers.adapters.http import OpenAIChatProvider
from tokrace.providers.model.errors import TokraceError
from tokrace.providers.model.events import Headers
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.serve import ServeServer
from tokrace.tui.app.app import TokraceApp, build_app
from tokrace.tui.app.screens.details import DetailsScreen
from tokrace.tui.app.screens.race import RaceScreen
from tokrace.tui.app.widgets.lane import LaneView
from tokrace.tui.app.widgets.palette import palette
from tokrace.tui.app.widgets.timeline import Timeline

FAILING = "flaky [beta]"
"""The failing lane's name: brackets that Rich or Textual markup would swallow."""


@pytest.fixture
async def server() -> AsyncIterator[ServeServer]:
    async with ServeServer(fast_source(), flavor="groq", report_tier="default") as s:
        yield s


def lanes(server: ServeServer) -> list[TierSpec]:
    """Chat (a 429 once, then an answer with Groq's own timing), Responses asking for priority, Anthropic asking
    for nothing, and a lane that gets HTTP 503 twice (retry-after 0.1 s) and gives up."""
    def spec(name: str, protocol: str, service_tier: str | None = None, fault: str | None = None,
             **options: object) -> TierSpec:
        if fault is not None:
            options["headers"] = {"x-tokrace-fault": fault}
        return TierSpec(name=name, provider=protocol, model="m", base_url=base_url(server, protocol),
                        service_tier=service_tier, options=dict(options))

    return [spec("chat", "openai", "default", "http=429,times=1"),
            spec("responses", "openai-responses", "priority"),
            spec("messages", "anthropic"),
            spec(FAILING, "openai", fault="http=503,retry_after=0.1", max_retries=1)]


async def raced(app: TokraceApp, pilot: Pilot[int]) -> RaceScreen:
    """Wait for the race to end, then draw one whole frame of it."""
    await app.runner.wait_started()
    await app.runner.wait_finished()
    screen = app.screen
    assert isinstance(screen, RaceScreen)
    screen.sample(force=True)
    await pilot.pause()
    return screen


def http_app(server: ServeServer) -> TokraceApp:
    return build_app(lanes(server), TurnRequest("Say hello.", max_tokens=20), provider_factory=provider,
                     animate=False, freeze_gc=False)


async def test_three_protocols_finish_while_the_failing_lane_shows_its_one_line_error_and_its_retry(
        server: ServeServer) -> None:
    app = http_app(server)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await raced(app, pilot)
        views = list(screen.query(LaneView))
        assert [view.lane.state for view in views] == ["done", "done", "done", "error"]
        assert [view.error.display for view in views] == [False, False, False, True]
        error = text_of(views[3].error).strip()
        assert error.startswith("✗ HTTP 503 from 127.0.0.1:") and "\n" not in error
        assert "(gave up after 1 retries)" in error and error.endswith("try again later")
        assert all(view.lane.tokens == 20 for view in views[:3])
        summary = text_of(screen.query_one("#summary", Static))
        assert f"failed: {FAILING}" in summary
        svg = app.export_screenshot()
        assert "flaky&#160;[beta]" in svg  # the border title, as it is
        timeline = screen.query_one(Timeline)
        failing = next(y for y, row in enumerate(timeline.rows) if row.lane == 3)
        assert [s.kind for s in timeline.rows[failing].spans if s.kind in ("connect", "retry")] == [
            "connect", "retry", "connect"]
        retry = palette(app).segment("retry")
        assert retry != palette(app).segment("wait")
        drawn = [seg for seg in timeline.render_line(failing) if "█" in seg.text]
        assert any(seg.style is not None and seg.style.color == retry.color for seg in drawn)  # in its own colour


async def test_the_header_shows_the_tier_asked_for_beside_the_one_got_highlighted_when_they_differ(
        server: ServeServer) -> None:
    app = http_app(server)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await raced(app, pilot)
        metas = [meta for meta in (view.meta.visual for view in screen.query(LaneView)) if isinstance(meta, Content)]
        assert len(metas) == 4  # Content: literal text, never read as markup
        plain = [str(meta) for meta in metas]
        # Reported: "got default" on a tier that never asked for a service tier (the anthropic lane here).
        assert plain[:3] == ["default → got default · m · openai", "priority → got default · m · openai-responses",
                             "m · anthropic"]
        assert plain[3] == "m · openai"  # it never got an answer: nothing reported
        highlighted = [[str(span.style) for span in meta.spans] for meta in metas]
        assert highlighted[1] == ["bold $warning"]
        assert not [style for style in highlighted[0] + highlighted[2] if "warning" in style]


async def test_details_list_the_wait_the_retries_the_tier_the_request_id_and_the_providers_own_timing(
        server: ServeServer) -> None:
    app = http_app(server)
    async with app.run_test(size=(160, 45)) as pilot:
        await raced(app, pilot)
        await pilot.press("1", "d")
        details = app.screen
        assert isinstance(details, DetailsScreen)
        text = text_of(details.body)
        rid = next(e.request_id for e in details.events if isinstance(e, Headers) and e.status == 200)

        def row(name: str) -> str:
            return next(line for line in text.splitlines() if line.startswith(name + " "))

        assert "default → got default" in row("service tier")
        assert rid in row("request id")
        assert row("retries").split()[2] == "1" and "HTTP 429" in row("retries")
        assert "connect" in row("to first token") and "the server until the first token" in row("to first token")
        assert "tokrace:" in row("Groq x_groq.usage: decode") and "tokrace:" in row("Groq x_groq.usage: to first")
        assert "queue_time" in row("Groq x_groq.usage") and "completion_time" in text
        assert "the provider's usage event (exact)" in row("output_tokens")  # where the count came from


def planted_key() -> str:
    return "sk-tokrace-" + "7f3a9c" * 4


async def test_an_error_quoting_a_redacted_key_is_drawn_as_it_is_and_never_the_key(
        server: ServeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Markup would read "[redacted]" as a tag and show "Bearer ;"."""
    key = planted_key()
    monkeypatch.setenv("TOKRACE_PLANTED_KEY", key)

    def echo(request: httpx.Request) -> httpx.Response:
        sent = request.headers["authorization"]
        return httpx.Response(401, json={"error": {"message": f"Incorrect API key provided: {sent}"}})

    def make(spec: TierSpec) -> Provider:
        if spec.name == "echoing [key]":
            return OpenAIChatProvider(spec, transport=httpx.MockTransport(echo))
        return provider(spec)

    tiers = [TierSpec(name="echoing [key]", provider="openai", model="m", base_url=base_url(server, "openai"),
                      api_key_env="TOKRACE_PLANTED_KEY"), lanes(server)[1]]
    app = build_app(tiers, TurnRequest("Say hi.", max_tokens=8), provider_factory=make, animate=False,
                    freeze_gc=False)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await raced(app, pilot)
        error = text_of(screen.query_one("#lane-0", LaneView).error)
        assert "Incorrect API key provided: Bearer [redacted]; check the key in $TOKRACE_PLANTED_KEY" in error
        lane_svg = app.export_screenshot()
        await pilot.press("d")
        assert isinstance(app.screen, DetailsScreen)
        assert "Bearer [redacted]" in text_of(app.screen.problem)
        details_svg = app.export_screenshot()
        titles = [title for title, _, _ in screen.commands()]
        assert "Details: echoing \\[key]" in titles  # the palette reads its titles as markup
    assert key not in lane_svg and key not in details_svg


async def test_a_problem_outside_the_lanes_is_notified_as_it_is(server: ServeServer) -> None:
    from textual.widgets._toast import Toast

    app = http_app(server)

    def no_clock() -> object:
        raise TokraceError("cannot start [the clock]")

    app.runner.clock_factory = no_clock  # type: ignore[assignment]
    async with app.run_test(size=(160, 45), notifications=True) as pilot:
        await raced(app, pilot)
        await pilot.pause()
        shown = [str(toast.render()) for toast in app.screen.query(Toast)]
        assert any("cannot start [the clock]" in text for text in shown), shown


async def test_warm_opens_every_lanes_connection_before_the_race(server: ServeServer) -> None:
    tiers = lanes(server)[1:3]
    app = build_app(tiers, TurnRequest("Say hello.", max_tokens=20), provider_factory=provider, animate=False,
                    freeze_gc=False, warm=True)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await raced(app, pilot)
        connects = [s for view in screen.query(LaneView) for s in view.lane.explicit if s.kind == "connect"]
        assert [s.label for s in connects] == ["reused connection"] * 2


def test_warm_on_the_command_line_reaches_the_screen_and_piped_the_bench(
        monkeypatch: pytest.MonkeyPatch, in_tmp: object) -> None:
    import sys

    from tokrace.tui import main as cli
    from tokrace.tui.app import launch
    from tokrace.tui.cli import headless

    seen: dict[str, dict[str, object]] = {}

    def keep(name: str) -> object:
        def call(*args: object, **kwargs: object) -> int:
            seen[name] = kwargs
            return 0
        return call

    monkeypatch.setattr(launch, "run_race", keep("screen"))
    monkeypatch.setattr(headless, "run_headless", keep("bench"))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert cli.main(["--warm"]) == 0
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    assert cli.main(["--warm"]) == 0
    assert seen["screen"]["warm"] is True and seen["bench"]["warm"] is True
