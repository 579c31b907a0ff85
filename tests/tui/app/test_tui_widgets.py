"""The pure parts of the widgets: wrapping the tail, bars and sparklines, the time axis, the summary, details."""

from __future__ import annotations

import pytest

from tokrace.providers.metrics.loop import loop_metrics
from tokrace.providers.metrics.turn import DEFINITIONS, SegmentSpan, turn_metrics
from tokrace.providers.model.events import Delta, Done, Error, Request, Usage
from tokrace.providers.model.tiers import Price, TierSpec
from tokrace.providers.race.live import LiveLane
from tokrace.providers.race.summary import race_summary
from tokrace.providers.runs.replay_control import ReplayControl
from tokrace.tui.app.screens.details import metric_rows
from tokrace.tui.app.widgets.gauge import bar, nice_scale, sparkline
from tokrace.tui.app.widgets.lane import figures, gauge_reading
from tokrace.tui.app.widgets.summary import finishes, racing_line, summary_line
from tokrace.tui.app.widgets.tail import wrap
from tokrace.tui.app.widgets.timeline import MAX_TRACKS, axis_span, paint, tick_label, tick_step, tracks

TURN_METRICS = ("connect_s", "ttfb_s", "ttft_s", "ttfa_s", "ttfs_s", "e2e_s", "output_tokens", "decode_tok_s",
                "e2e_tok_s", "itl_ms", "tokens_per_event", "stalls", "cost_usd")


def plain(lines: list[list[tuple[str, str]]]) -> list[str]:
    """The visible text of wrapped lines (a space left at a line's end shows nothing)."""
    return ["".join(text for text, _ in line).rstrip() for line in lines]


def test_wrap_breaks_at_spaces_and_drops_the_breaking_space() -> None:
    assert plain(wrap([("content", "the quick brown fox jumps")], 10)) == ["the quick", "brown fox", "jumps"]


def test_wrap_keeps_newlines_and_cuts_words_longer_than_a_line() -> None:
    assert plain(wrap([("content", "ab\nabcdefghijkl")], 5)) == ["ab", "abcde", "fghij", "kl"]


def test_wrap_joins_runs_of_one_channel_and_keeps_channels_apart() -> None:
    lines = wrap([("reasoning", "hmm "), ("reasoning", "so"), ("content", " yes")], 40)
    assert lines == [[("hmm so", "reasoning"), (" yes", "content")]]


def test_wrap_measures_wide_characters_by_cells() -> None:
    assert plain(wrap([("content", "速度速度速度")], 4)) == ["速度", "速度", "速度"]


def test_bar_fills_eighths_and_never_overflows() -> None:
    assert bar(0.5, 10) == ("█████", "─────")
    assert bar(0.0625, 2) == ("▏", "─")
    assert bar(3.0, 4) == ("████", "")


def test_sparkline_scales_to_eight_heights_and_blanks_zero() -> None:
    assert sparkline([0, 10, 50, 100], 100, 10) == " ▁▄█"
    assert sparkline([1, 2, 3, 4], 4, 2) == "▆█"


@pytest.mark.parametrize(("value", "scale"), [(0, 10), (54, 100), (751, 1000), (1001, 2000), (20_400, 25_000)])
def test_nice_scale_rounds_up_to_a_readable_number(value: float, scale: float) -> None:
    assert nice_scale(value) == scale


def test_axis_span_holds_the_race_with_a_little_room() -> None:
    assert [axis_span(s) for s in (0.5, 2.0, 4.76, 8.51, 29.0)] == [1, 3, 6, 10, 40]


def test_tick_step_keeps_labels_apart_and_reads_seconds() -> None:
    assert tick_step(10, 140) == 1
    assert tick_step(10, 60) == 2
    assert tick_step(1.25, 140) == 0.1
    assert (tick_label(3, 1), tick_label(0.5, 0.1), tick_label(600, 120)) == ("3 s", "0.5 s", "600 s")


def test_paint_gives_every_segment_at_least_one_cell_and_later_ones_win() -> None:
    cells = paint([("connect", 0.0, 0.001), ("pending", 0.001, 1.0), ("model", 1.0, 2.0)], span=4.0, cells=8)
    assert cells == ["pending", "pending", "model", "model", None, None, None, None]
    assert paint([("connect", 0.0, 0.001), ("pending", 0.5, 1.0)], span=4.0, cells=8)[0] == "connect"


def test_tool_calls_running_side_by_side_go_on_rows_of_their_own() -> None:
    spans = [SegmentSpan("model", 0.0, 1.0), SegmentSpan("tool", 1.0, 3.0, "logs"), SegmentSpan("tool", 1.0, 2.0, "a"),
             SegmentSpan("tool", 2.0, 2.5, "b"), SegmentSpan("model", 3.0, 4.0), SegmentSpan("tool", 4.0, 5.0, "c")]
    rows = tracks(spans)
    assert [[s.label or s.kind for s in row] for row in rows] == [["model", "a", "b", "model", "c"], ["logs"]]
    assert [len(r) for r in tracks([SegmentSpan("tool", 0.0, 1.0, str(i)) for i in range(5)])] == [1] * (
        MAX_TRACKS - 1) + [5 - MAX_TRACKS + 1]


def lane(name: str, ttft: float, rate: float, n: int, price: Price | None = None) -> LiveLane:
    live = LiveLane(TierSpec(name=name, provider="synthetic", price=price))
    for event in [Request(t=0.0), *(Delta(t=ttft + i / rate, text=" x", tokens=1) for i in range(n)),
                  Usage(t=ttft + (n - 1) / rate, input=100, output=n), Done(t=ttft + (n - 1) / rate)]:
        live.on_event(event)
    return live


def test_summary_line_says_who_won_by_how_much_and_the_speedups() -> None:
    text = summary_line(race_summary([lane("slow", 1.0, 50, 101), lane("fast", 0.2, 500, 101)])).plain
    assert text == ("fast finished first in 0.40 s, 2.60 s ahead of slow · against slow: "
                    "fast 10.0× tokens 7.5× turn")


def test_summary_line_never_starts_a_styled_run_with_a_space() -> None:
    """An SVG viewer drops a run's leading space: "Sol ultrafastfinished first", "ahead of  Sol priority·"."""
    from rich.console import Console

    summary = race_summary([lane("Sol standard", 1.0, 50, 101), lane("Sol priority", 0.6, 100, 101),
                            lane("Sol ultrafast", 0.2, 500, 101)])
    runs = [seg.text for seg in summary_line(summary).render(Console(width=400))]
    assert len(runs) >= 4 and not [run for run in runs[1:] if run.startswith(" ")]
    assert "".join(runs).startswith("Sol ultrafast finished first in 0.40 s, 1.20 s ahead of Sol priority · against")


def test_summary_line_words_a_tie_as_a_tie() -> None:
    # Reported: "0.00 s ahead" for lanes that finished together.
    text = summary_line(race_summary([lane("a", 0.2, 500, 101), lane("b", 0.2, 500, 101)])).plain
    assert "ahead" not in text and "finished first" not in text
    assert text.startswith("a and b tied at 0.40 s")


def test_the_status_line_names_the_lane_that_finished_first_not_the_one_with_most_tokens() -> None:
    # Reported: "most tokens: Groq" while Cerebras had finished first (with a shorter answer).
    from tokrace.providers.race.live import LiveRace

    race = LiveRace([TierSpec(name="Cerebras", provider="synthetic"), TierSpec(name="Groq", provider="synthetic")])
    short = lane("Cerebras", 0.1, 1000, 50)
    running = LiveLane(TierSpec(name="Groq", provider="synthetic"))
    for event in [Request(t=0.0), *(Delta(t=0.2 + i / 200, text=" x", tokens=1) for i in range(150))]:
        running.on_event(event)
    race.lanes = [short, running]
    text = racing_line(race, 1.0).plain
    assert "most tokens" not in text and "Cerebras finished first in 0.15 s" in text


def test_the_status_line_says_a_tie_on_tokens_as_a_tie() -> None:
    from tokrace.providers.race.live import LiveRace

    tiers = [TierSpec(name=n, provider="synthetic") for n in ("A", "B", "C")]
    race = LiveRace(tiers)
    for live in race.lanes:
        for event in [Request(t=0.0), *(Delta(t=0.2 + i / 100, text=" x", tokens=1) for i in range(40))]:
            live.on_event(event)
    text = racing_line(race, 1.0).plain
    assert "most tokens" not in text and "level on tokens: A, B and C (40 each)" in text


async def test_the_status_line_is_as_current_as_the_lanes() -> None:
    from tui_harness import at, demo_app

    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 0.3)
        for t in (0.35, 0.4, 0.45):  # frames between the slow ones
            await clock.advance_to(app.runner.race.origin + t)  # type: ignore[union-attr]
            app.screen.sample()
            await pilot.pause()
            tokens = max(lane.tokens for lane in app.runner.live.lanes)
            assert f"({tokens:,})" in app.screen.summary.content.plain  # type: ignore[attr-defined]


@pytest.mark.parametrize(("speedup", "words"), [(1.25, "1.25× sooner"), (1.0, "in the same time"),
                                                (1.004, "in the same time"), (0.94, "later (1.06× the time)")])
def test_a_speed_up_is_worded_for_what_it_is(speedup: float, words: str) -> None:
    # Reported: "finishes the loop 0.94× sooner" for a lane that finished later.
    assert finishes(speedup) == words


def test_summary_line_names_failed_lanes() -> None:
    broken = LiveLane(TierSpec(name="broken", provider="synthetic"))
    broken.on_event(Request(t=0.0))
    broken.on_event(Error(t=0.1, error="http", message="HTTP 500"))
    assert summary_line(race_summary([broken])).plain == "no lane finished · failed: broken"


def test_figures_mark_the_token_source_and_price_the_tokens() -> None:
    priced = lane("a", 0.5, 100, 10, Price(input=5.0, output=30.0))
    assert figures(priced, 9.0) == "TTFT 0.50 s · 10 tok · 0.59 s · $0.0008"
    chunks = LiveLane(TierSpec(name="b", provider="synthetic"))
    chunks.on_event(Request(t=0.0))
    chunks.on_event(Delta(t=0.25, text="hi"))
    assert figures(chunks, 1.0) == "TTFT 0.25 s · ~1 tok · 1.00 s · $—"


def test_gauge_reads_the_live_rate_then_the_average_once_ended() -> None:
    running = LiveLane(TierSpec(name="r", provider="synthetic"))
    for event in [Request(t=0.0), *(Delta(t=0.5 + i / 100, text="x", tokens=1) for i in range(150))]:
        running.on_event(event)
    value, label = gauge_reading(running, running.last_t)
    assert label == f"{value:,.0f} tok/s" and value == pytest.approx(100, rel=0.02)
    ended = lane("e", 0.5, 100, 150)
    assert gauge_reading(ended, 5.0) == (pytest.approx(100.0), "avg 100 tok/s")


def test_details_list_every_metric_with_its_source() -> None:
    events = [Request(t=0.0), Delta(t=0.3, text="Hello.", tokens=2), Delta(t=0.4, text=" Bye.", tokens=2),
              Usage(t=0.4, input=10, output=4), Done(t=0.4)]
    rows = metric_rows(turn_metrics(events, Price(input=5.0, output=30.0)),
                       TierSpec(name="t", provider="synthetic", price=Price(input=5.0, output=30.0)))
    assert [name for name, _, _ in rows] == [name for name in DEFINITIONS if name in TURN_METRICS]
    by_name = {name: (value, source) for name, value, source in rows}
    assert by_name["ttft_s"] == ("0.300 s", "first delta with text, stamped at the profile's planned moment")
    assert by_name["connect_s"] == ("—", "not applicable: a synthetic lane opens no socket")
    assert by_name["output_tokens"] == ("4", "the provider's usage event (exact)")
    assert by_name["cost_usd"][1] == "usage × $30/M out, $5/M in"
    http = {name: (value, source) for name, value, source in metric_rows(
        turn_metrics(events), TierSpec(name="t", provider="openai"))}
    assert http["ttft_s"] == ("0.300 s", "first delta with text, stamped when read")
    assert http["connect_s"][1] == "no connect event: reused connection or not reported"


def test_details_name_the_tokenizer_that_counted() -> None:
    m = turn_metrics([Request(t=0.0), Delta(t=0.3, text="Hello there."), Done(t=0.3)], model="gpt-5.6-sol")
    rows = {name: source for name, _, source in metric_rows(m, TierSpec(name="t", provider="openai"))}
    assert rows["output_tokens"] == f"tiktoken {m.encoding} on the streamed text (≈)"
    assert rows["cost_usd"] == "no price for this tier"


def test_replay_status_shows_state_speed_and_position() -> None:
    from pathlib import Path

    control = ReplayControl(Path("/tmp/run.jsonl"), 9.5, speed=2.0)
    assert control.status(1.25, finished=False) == "‖ paused  ×2  1.25 s / 9.50 s  ·  run.jsonl"
    assert control.status(3.0, finished=True).startswith("■ finished  ×2  9.50 s / 9.50 s")


def test_details_of_a_whole_loop_add_its_own_metrics() -> None:
    from tokrace.providers.model.events import Segment

    events = [Request(t=0.0), Delta(t=0.2, text="a", tokens=1), Delta(t=0.3, text="b", tokens=1), Done(t=0.3),
              Segment(t=0.3, seg="tool", start=0.3, end=1.3, label="tests"),
              Request(t=1.3), Delta(t=1.5, text="c", tokens=1), Done(t=1.5)]
    rows = {name: value for name, value, _ in metric_rows(loop_metrics(events), TierSpec(name="t", provider="x"))}
    assert set(DEFINITIONS) == set(rows)
    assert rows["turns"] == "2" and rows["amdahl_max_speedup"] == "1.50×"  # 1.5 s, 0.5 of it model
