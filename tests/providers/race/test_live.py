"""The live lane model the screen samples: states, counts, rates, segments and the race summary."""

from __future__ import annotations

import pytest

from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.loop.scenario_file import load_scenario
from tokrace.providers.metrics.loop import loop_metrics
from tokrace.providers.metrics.turn import split_turns, turn_metrics, turn_segments
from tokrace.providers.model import tokens
from tokrace.providers.model.events import (
    Delta,
    Done,
    Error,
    Event,
    Headers,
    Request,
    Segment,
    ToolCall,
    Usage,
    loop_end,
)
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import Price, TierSpec
from tokrace.providers.race.live import LiveLane, LiveRace
from tokrace.providers.race.race import Race
from tokrace.providers.race.rate import BUCKET_S, DELIVERY_LAG_S, RAMP_S, WINDOW_S
from tokrace.providers.race.summary import race_summary
from tokrace.providers.timing.clock import VirtualClock


def tier(name: str = "lane", price: Price | None = None, **options: object) -> TierSpec:
    return TierSpec(name=name, provider="synthetic", model="gpt-5.6-sol", price=price, options=dict(options))


def feed(lane: LiveLane, events: list[Event]) -> LiveLane:
    for event in events:
        lane.on_event(event)
    return lane


async def race(tiers: list[TierSpec], max_tokens: int = 120) -> tuple[LiveRace, Race]:
    clock = VirtualClock()
    live = LiveRace(tiers)
    r = Race(tiers, TurnRequest("why?", max_tokens=max_tokens), clock, [live])
    await clock.drive(r.run())
    live.finish()
    return live, r


def stream(rate: float, n: int, start: float = 0.5) -> list[Event]:
    """A turn: request at 0, headers, ``n`` one-token deltas at ``rate`` from ``start``, usage, done."""
    evs: list[Event] = [Request(t=0.0), Headers(t=0.05)]
    evs += [Delta(t=start + i / rate, text=" word", tokens=1) for i in range(n)]
    end = start + (n - 1) / rate
    return [*evs, Usage(t=end, input=10, output=n), Done(t=end)]


async def test_live_figures_agree_with_metrics_for_every_demo_lane() -> None:
    live, r = await race(demo_tiers())
    for lane, run in zip(live.lanes, r.lanes, strict=True):
        m = turn_metrics(run.events, run.tier.price, run.tier.model)
        assert lane.state == "done" and lane.ok
        assert lane.ttft == pytest.approx(m.ttft_s)
        assert lane.e2e == pytest.approx(m.e2e_s)
        assert lane.tokens == m.output_tokens
        assert lane.tokens_source == m.tokens_source == "usage"
        assert lane.decode_rate() == pytest.approx(m.decode_tok_s)
        assert lane.cost_so_far() == pytest.approx(m.cost_usd) if m.cost_usd is not None else lane.cost_so_far() is None
        assert [(s.kind, s.start, s.end) for s in lane.segments(99.0)] == [
            (s.kind, s.start, s.end) for s in turn_segments(run.events)]


async def test_thinking_lane_draws_think_then_model_as_metrics_does() -> None:
    live, r = await race([tier(ttft_ms=200, tok_s=100, thinking_tokens=20, seed=4)], max_tokens=60)
    lane, events = live.lanes[0], r.lanes[0].events
    assert [s.kind for s in lane.segments(99.0)] == ["pending", "think", "model"]
    assert [(s.kind, s.start, s.end) for s in lane.segments(99.0)] == [
        (s.kind, s.start, s.end) for s in turn_segments(events)]
    assert lane.decode_rate() == pytest.approx(turn_metrics(events).decode_tok_s)


def test_badge_moves_connecting_waiting_thinking_streaming_done() -> None:
    lane = LiveLane(tier())
    seen = [lane.state]
    for event in [Request(t=0.0), Headers(t=0.1), Delta(t=0.2, text="hm", channel="reasoning", tokens=1),
                  Delta(t=0.3, text="Hi", tokens=1), Usage(t=0.3, output=2), Done(t=0.3)]:
        lane.on_event(event)
        seen.append(lane.state)
    assert seen == ["idle", "connecting", "waiting", "thinking", "streaming", "streaming", "done"]
    assert lane.finished


def test_connect_segment_ends_connecting_and_moves_the_wait() -> None:
    lane = feed(LiveLane(tier()), [Request(t=0.0), Segment(t=0.08, seg="connect", start=0.0, end=0.08)])
    assert lane.state == "waiting"
    assert [(s.kind, s.start, s.end) for s in lane.segments(0.5)] == [("connect", 0.0, 0.08), ("pending", 0.08, 0.5)]


def test_an_open_turn_grows_to_now() -> None:
    lane = feed(LiveLane(tier()), [Request(t=0.0), Delta(t=0.4, text="a", tokens=1)])
    assert [(s.kind, s.end) for s in lane.segments(1.25)] == [("pending", 0.4), ("model", 1.25)]
    assert lane.elapsed(1.25) == 1.25
    assert lane.e2e is None


def test_failing_lane_shows_its_error_and_is_final() -> None:
    lane = feed(LiveLane(tier()), [Request(t=0.0), Delta(t=0.2, text="a", tokens=1),
                                   Error(t=0.3, error="http", message="HTTP 503: overloaded", status=503)])
    assert (lane.state, lane.error, lane.finished, lane.ok) == ("error", "HTTP 503: overloaded", True, False)
    assert lane.elapsed(5.0) == 0.3


async def test_synthetic_failure_ends_the_lane_in_error_while_others_finish() -> None:
    live, _ = await race([tier("fails", tok_s=200, fail_after_tokens=10), tier("fine", tok_s=200)])
    assert live.lanes[0].state == "error" and "synthetic failure" in (live.lanes[0].error or "")
    assert live.lanes[1].state == "done"


def test_stopped_lane_is_stopped_not_error() -> None:
    lane = feed(LiveLane(tier()), [Request(t=0.0), Error(t=1.0, error="stopped", message="stopped before the end")])
    assert lane.state == "stopped"


def test_tool_call_turn_waits_in_tool_state() -> None:
    lane = feed(LiveLane(tier(), expected_turns=2), [
        Request(t=0.0), Delta(t=0.2, text='{"q": 1}', channel="tool_args", tokens=3),
        ToolCall(t=0.3, id="c1", name="search_logs", arguments='{"q": 1}'), Done(t=0.3, finish_reason="tool_calls")])
    assert (lane.state, lane.detail, lane.finished) == ("tool", "search_logs", False)
    assert "→ search_logs" in "".join(text for _, text in lane.pieces)


def test_announced_span_shows_until_the_next_step_and_draws_only_up_to_now() -> None:
    lane = feed(LiveLane(tier(), expected_turns=2), [
        Request(t=0.0), Delta(t=0.1, text="ok", tokens=1), Done(t=0.2),
        Segment(t=0.2, seg="human", start=0.2, end=3.0, label="approve")])
    assert (lane.state_at(1.0), lane.detail) == ("human", "approve")
    assert lane.state_at(3.0) == "human"  # never "done" mid-loop: the next step's first event moves it on
    assert [(s.kind, s.end) for s in lane.segments(1.0)][-1] == ("human", 1.0)
    assert lane.elapsed(1.0) == 1.0  # not finished: the loop goes on


def test_two_turns_sum_their_usage_and_finish_after_the_second() -> None:
    turn1 = stream(100, 5)
    turn2 = [Request(t=2.0), *(Delta(t=2.5 + i / 100, text=" x", tokens=1) for i in range(3)),
             Usage(t=2.52, input=20, output=4), Done(t=2.52)]
    lane = LiveLane(tier(price=Price(input=5.0, output=30.0)), expected_turns=2)
    feed(lane, turn1)
    assert not lane.finished and lane.state == "done"
    feed(lane, [*turn2[:1], Segment(t=2.0, seg="tool", start=1.0, end=2.0, label="tests")])
    feed(lane, turn2[1:])
    assert lane.finished
    assert lane.tokens == 9
    assert lane.e2e == pytest.approx(2.52)
    assert lane.cost_so_far() == pytest.approx((9 * 30.0 + 30 * 5.0) / 1e6)
    kinds = [s.kind for s in lane.segments(9.0)]
    assert kinds == ["pending", "model", "tool", "pending", "model"]
    for turn_events, turn in zip(split_turns(turn1 + turn2), lane.turns, strict=True):
        assert turn_metrics(turn_events).output_tokens == turn.tokens()


def test_usage_replaces_the_streamed_count() -> None:
    lane = feed(LiveLane(tier()), [Request(t=0.0), Delta(t=0.1, text="a", tokens=1), Delta(t=0.2, text="b", tokens=1)])
    assert (lane.tokens, lane.tokens_source) == (2, "provider")
    lane.on_event(Usage(t=0.2, output=7))
    assert (lane.tokens, lane.tokens_source) == (7, "usage")


def test_deltas_without_counts_are_chunks_until_the_tokenizer_arrives() -> None:
    asked: list[LiveLane] = []
    lane = LiveLane(tier(), on_needs_encoding=asked.append)
    text = "Amdahl's law in a new costume, measured end to end."
    words = text.split(" ")
    feed(lane, [Request(t=0.0), *(Delta(t=0.1 * (i + 1), text=w if i == 0 else " " + w) for i, w in enumerate(words))])
    assert asked == [lane]
    assert (lane.tokens, lane.tokens_source) == (10, "chunks")
    name, enc = tokens.get_encoding(lane.tier.model)
    lane.set_encoding(name, enc)
    lane.on_event(Delta(t=2.0, text=" Again."))
    expected = tokens.count(text + " Again.", lane.tier.model)
    assert expected is not None
    assert (lane.tokens, lane.tokens_source, lane.encoding) == (expected[0], "tokenizer", name)


def test_window_rate_reads_a_steady_stream_exactly() -> None:
    lane = feed(LiveLane(tier()), stream(200, 600)[:-2])
    assert lane.rate(lane.last_t) == pytest.approx(200, rel=0.01)


def test_events_that_reach_the_lane_late_do_not_read_as_a_slower_stream() -> None:
    """A coarse lane's grid, a connection's hand-over or paced reads deliver tokens a few ms after their time: the
    gauge reads the same then as at the newest token's own moment (without the lag's allowance, 2 % lower at
    20 ms), and a stream that stopped still falls to zero."""
    lane = feed(LiveLane(tier()), stream(750, 3000)[:-2])
    last = lane.last_t
    assert lane.rate(last + 0.02) == lane.rate(last) == pytest.approx(750, rel=0.01)
    assert lane.rate(last + 0.5) < lane.rate(last)


def test_young_stream_rate_ramps_instead_of_spiking() -> None:
    lane = feed(LiveLane(tier()), [Request(t=0.0), Delta(t=1.0, text="a", tokens=5), Delta(t=1.01, text="b", tokens=1)])
    assert lane.rate(1.01) == pytest.approx(1 / RAMP_S)
    assert lane.rate(1.5) == pytest.approx(1 / (0.5 - DELIVERY_LAG_S))


def test_rate_falls_to_zero_a_window_after_the_stream_stops() -> None:
    lane = feed(LiveLane(tier()), stream(100, 100)[:-2])
    last = lane.last_t
    assert lane.rate(last) > 90
    assert lane.rate(last + WINDOW_S + DELIVERY_LAG_S + 0.01) == 0.0


def test_history_buckets_tokens_by_lane_time() -> None:
    lane = feed(LiveLane(tier()), stream(100, 100, start=0.0)[:-2])
    assert lane.history_rates(0.99, 10) == pytest.approx([100.0, 100.0, 100.0])
    assert len(lane.history) == int(0.99 / BUCKET_S) + 1


def test_tail_returns_the_last_characters_across_pieces() -> None:
    lane = feed(LiveLane(tier()), [Request(t=0.0), Delta(t=0.1, text="hello ", tokens=1),
                                   Delta(t=0.2, text="brave ", channel="reasoning", tokens=1),
                                   Delta(t=0.3, text="world", tokens=1)])
    assert lane.tail(8) == [("reasoning", "ve "), ("content", "world")]
    assert lane.answer_text() == "hello world"


def test_summary_names_the_winner_its_lead_and_speedups_against_the_slowest() -> None:
    fast = feed(LiveLane(tier("fast")), stream(400, 200, start=0.2))
    slow = feed(LiveLane(tier("slow")), stream(50, 200, start=1.0))
    broken = feed(LiveLane(tier("broken")), [Request(t=0.0), Error(t=0.1, error="http", message="nope")])
    summary = race_summary([slow, fast, broken])
    assert (summary.first, summary.runner_up, summary.slowest, summary.failed) == ("fast", "slow", "slow", ["broken"])
    assert summary.lead_s == pytest.approx((1.0 + 199 / 50) - (0.2 + 199 / 400))
    by_name = {r.name: r for r in summary.results}
    assert by_name["fast"].tokens_speedup == pytest.approx(8.0)
    assert by_name["fast"].turn_speedup == pytest.approx((1.0 + 199 / 50) / (0.2 + 199 / 400))
    assert by_name["slow"].turn_speedup == 1.0


def test_summary_with_no_finisher_lists_only_failures() -> None:
    broken = feed(LiveLane(tier("broken")), [Request(t=0.0), Error(t=0.1, error="http", message="nope")])
    assert race_summary([broken]).first is None and race_summary([broken]).failed == ["broken"]


def test_race_finish_makes_every_lane_final() -> None:
    live = LiveRace([tier("a"), tier("b")], expected_turns=[None, None])
    live(0, Request(t=0.0))
    live(0, Done(t=0.1))
    assert not live.finished
    live.finish()
    assert live.finished


def test_a_loop_lane_shows_each_step_and_is_done_only_at_the_loop_end() -> None:
    lane = LiveLane(tier(), expected_turns=None, loop=True)
    seen = []
    for event in [*stream(100, 5)[:-1], Done(t=0.54),
                  Segment(t=0.54, seg="wait", start=0.54, end=2.0, label="rollout"),
                  Request(t=2.0), ToolCall(t=2.3, id="c1", name="query_logs", arguments="{}"),
                  Done(t=2.3, finish_reason="tool_calls"),
                  Segment(t=2.3, seg="tool", start=2.3, end=4.0, label="query_logs"),
                  Segment(t=2.3, seg="tool", start=2.3, end=3.0, label="query_metrics"),
                  Request(t=4.0), Delta(t=4.2, text="ok", tokens=1), Done(t=4.2),
                  Segment(t=4.2, seg="human", start=4.2, end=9.0, label="approve"),
                  loop_end(9.0, "incident", 3)]:
        lane.on_event(event)
        seen.append((lane.state, lane.detail))
    assert seen[8:] == [
        ("waiting", ""), ("waiting", "rollout"), ("connecting", ""), ("tool", "query_logs"), ("tool", "query_logs"),
        ("tool", "query_logs"), ("tool", "query_logs, query_metrics"), ("connecting", ""), ("streaming", ""),
        ("waiting", ""), ("human", "approve"), ("done", "")]
    assert (lane.ok, lane.e2e, lane.ttft, lane.tokens) == (True, 9.0, 0.5, 6)


def test_a_lane_stopped_during_a_person_ends_when_it_was_stopped() -> None:
    lane = feed(LiveLane(tier(), expected_turns=None, loop=True), [
        *stream(100, 5), Segment(t=0.54, seg="human", start=0.54, end=56.4, label="approve"),
        Error(t=20.0, error="stopped", message="stopped before the end")])
    assert (lane.state, lane.ended_at, lane.e2e, lane.elapsed(90.0)) == ("stopped", 20.0, 20.0, 20.0)
    assert [(s.kind, s.end) for s in lane.segments(90.0)][-1] == ("human", 20.0)
    assert lane.loop_so_far(90.0).breakdown["human"] == pytest.approx(20.0 - 0.54)


async def test_loop_so_far_agrees_with_loop_metrics_for_every_demo_lane() -> None:
    scenario = load_scenario("incident")
    clock = VirtualClock()
    live = LiveRace(demo_tiers(), [None] * 3, loops=[True] * 3)
    r = Race(demo_tiers(), TurnRequest(scenario.first_prompt(), 400), clock, [live], scenario=scenario)
    await clock.drive(r.run())
    for lane, run in zip(live.lanes, r.lanes, strict=True):
        m, so_far = loop_metrics(run.events, run.tier.price, run.tier.model), lane.loop_so_far(999.0)
        assert lane.ok and so_far.ok and so_far.e2e_s == pytest.approx(m.e2e_s)
        assert so_far.breakdown == pytest.approx(m.breakdown)
        assert so_far.model_parts == pytest.approx(m.model_parts)
        assert so_far.amdahl_max_speedup == pytest.approx(m.amdahl_max_speedup)
        assert (so_far.output_tokens, so_far.ttft_s) == (m.output_tokens, pytest.approx(m.ttft_s))
        assert so_far.decode_tok_s == pytest.approx(m.decode_tok_s)


def test_a_single_prompt_is_a_loop_of_one_turn_all_model() -> None:
    m = feed(LiveLane(tier()), stream(100, 5)).loop_so_far(9.0)
    assert m.ok and m.breakdown == pytest.approx({"pending": 0.5, "model": 0.04})
    assert (m.model_share, m.amdahl_max_speedup) == (pytest.approx(1.0), None)


def test_a_tool_call_shows_once_not_as_its_raw_arguments_and_then_the_call() -> None:
    # Reported: a tool call printed twice in the lane (raw arguments, then the call).
    args = '{"path": "app.py"}'
    lane = feed(LiveLane(tier()), [Request(t=0.0), Delta(t=0.1, text="Let me look.", channel="content"),
                                   Delta(t=0.2, text=args[:9], channel="tool_args"),
                                   Delta(t=0.3, text=args[9:], channel="tool_args"),
                                   ToolCall(t=0.3, id="c1", name="read_file", arguments=args),
                                   Done(t=0.3, finish_reason="tool_calls")])
    shown = "".join(text for _, text in lane.tail(10_000))
    assert shown.count('"path"') == 1 and "→ read_file(" in shown and "Let me look." in shown


def test_a_stall_in_the_stream_is_drawn_as_a_wait_live_and_final_alike() -> None:
    # Reported: an HTTP stall drawn as a solid model bar (it is a wait).
    events: list[Event] = [Request(t=0.0), Delta(t=0.2, text="a", tokens=1), Delta(t=0.25, text="b", tokens=1),
                           Delta(t=2.25, text="c", tokens=1), Delta(t=2.3, text="d", tokens=1), Done(t=2.3)]
    final = turn_segments(events)
    assert [(s.kind, s.start, s.end) for s in final] == [("pending", 0.0, 0.2), ("model", 0.2, 0.25),
                                                         ("pending", 0.25, 2.25), ("model", 2.25, 2.3)]
    lane = feed(LiveLane(tier()), events)
    assert lane.segments(3.0) == final
    assert turn_metrics(events).stalls == 1


def test_a_usage_before_the_first_token_is_not_the_answers_count() -> None:
    # Reported: Anthropic lanes show "1 tok" before any token (message_start carries output_tokens 1).
    lane = feed(LiveLane(tier()), [Request(t=0.0), Usage(t=0.1, input=10, output=1)])
    assert lane.tokens == 0
    feed(lane, [Delta(t=0.2, text="Hello", tokens=1), Delta(t=0.3, text=" there", tokens=1),
                Delta(t=0.4, text=" friend", tokens=1)])
    assert lane.tokens == 3  # not the 1 of the usage that came first
    feed(lane, [Usage(t=0.5, input=10, output=4), Done(t=0.5)])
    assert lane.tokens == 4


def test_a_stream_cut_after_an_early_usage_counts_what_streamed() -> None:
    events: list[Event] = [Request(t=0.0), Usage(t=0.1, input=10, output=1), Delta(t=0.2, text=" one", tokens=1),
                           Delta(t=0.3, text=" two", tokens=1), Delta(t=0.4, text=" three", tokens=1),
                           Error(t=0.5, error="stream", message="cut")]
    m = turn_metrics(events)
    assert m.output_tokens == 3 and m.tokens_source != "usage" and m.input_tokens == 10
    assert feed(LiveLane(tier()), events).tokens == 3


def test_a_lane_that_failed_before_any_answer_has_no_e2e() -> None:
    from tokrace.providers.model.events import Error as Failed
    from tokrace.providers.model.events import Request as Asked
    from tokrace.providers.model.tiers import TierSpec as Tier
    from tokrace.providers.race.live import LiveRace

    live = LiveRace([Tier(name="keyless", provider="openai")])
    lane = live.lanes[0]
    lane.on_event(Asked(t=0.0))
    lane.on_event(Failed(t=1.34, error="setup", message="no key"))
    assert lane.ended_at == 1.34 and lane.e2e is None
