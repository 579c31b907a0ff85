"""Loop metrics (docs/design.md §6) and the bottleneck figures, from a lane's events alone."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from wall_clock import without_started_at

from tokrace.providers.adapters.replay import replay_tiers
from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.loop.scenario_file import builtin_names, load_scenario
from tokrace.providers.metrics.loop import (
    Bottleneck,
    LoopMetrics,
    bottlenecks,
    breakdown,
    loop_metrics,
    representative,
)
from tokrace.providers.metrics.turn import SegmentSpan
from tokrace.providers.model.events import Delta, Done, Error, Event, Request, Segment, Usage, loop_end
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.recording import Recorder, read_recording
from tokrace.providers.runs.session import SessionResult, report, run_session

LOOP_KEYS = {"turns", "breakdown", "model_share", "amdahl_max_speedup"}


def race_demo(name: str, listeners: Sequence[Recorder] = ()) -> SessionResult:
    """A built-in scenario on the demo tiers, fast-forwarded."""
    return asyncio.run(run_session(demo_tiers(), TurnRequest(prompt=""), fast_forward=True,
                                   scenario=load_scenario(name), listeners=listeners))


@functools.cache
def demo(name: str) -> SessionResult:
    """The same, once per scenario for the whole module (the tests only read it)."""
    return race_demo(name)


def loops(result: SessionResult) -> list[LoopMetrics]:
    out = [lane[0] for lane in result.metrics]
    assert all(isinstance(m, LoopMetrics) for m in out)
    return out  # type: ignore[return-value]


def turn(t0: float, first: float, last: float, tokens: int, end: float | None = None) -> list[Event]:
    """A model request at ``t0`` whose tokens stream from ``first`` to ``last`` (two deltas)."""
    return [Request(t=t0), Delta(t=first, text="a", tokens=1), Delta(t=last, text="b", tokens=tokens - 1),
            Usage(t=last, output=tokens), Done(t=last if end is None else end)]


@pytest.mark.parametrize("name", builtin_names())
def test_every_lanes_breakdown_sums_to_its_e2e_within_a_millisecond(name: str) -> None:
    for m in loops(demo(name)):
        assert m.ok, m.error
        assert abs(sum(m.breakdown.values()) - (m.e2e_s or 0)) < 0.001
        assert abs(sum(s for _, s, _ in bottlenecks([("x", m)])[0].parts) - (m.e2e_s or 0)) < 0.001


def test_the_coding_loop_streams_about_14x_faster_on_ultrafast_but_finishes_far_less_sooner() -> None:
    standard, _, ultrafast = bottlenecks([(n, m) for n, m in zip("spu", loops(demo("coding-loop")), strict=True)])
    assert standard.token_speedup == 1.0
    assert ultrafast.token_speedup is not None and 13 < ultrafast.token_speedup < 15
    assert ultrafast.e2e_speedup is not None and 1.2 < ultrafast.e2e_speedup < 3
    assert standard.amdahl_max_speedup is not None and ultrafast.e2e_speedup < standard.amdahl_max_speedup
    assert len(loops(demo("coding-loop"))[0].turns) == 30


def test_speed_ups_are_against_the_reference_lane_when_the_race_names_one() -> None:
    """A trace's original lane is what a re-timed race is about: every speed-up is against it, even when a
    re-timed tier streams slower than it."""
    pairs = list(zip(("s", "p", "u"), loops(demo("coding-loop")), strict=True))
    standard, priority, ultrafast = bottlenecks(pairs, reference="p")
    assert {b.against for b in (standard, priority, ultrafast)} == {"p"}
    assert priority.e2e_speedup == 1.0 and priority.token_speedup == 1.0
    assert ultrafast.e2e_speedup == pytest.approx(priority.e2e_s / ultrafast.e2e_s)
    assert standard.token_speedup is not None and standard.token_speedup < 1.0
    assert bottlenecks(pairs)[2].against == "s"


def test_the_loop_sums_tokens_and_cost_and_keeps_the_first_turns_ttft() -> None:
    standard = loops(demo("incident"))[0]
    assert standard.output_tokens == sum(t.output_tokens for t in standard.turns)
    assert standard.ttft_s == standard.turns[0].ttft_s
    assert standard.cost_usd == pytest.approx(sum(t.cost_usd or 0 for t in standard.turns))
    assert standard.turns[1].start > standard.turns[0].start


def test_the_loops_decode_rate_weighs_each_turn_by_its_tokens() -> None:
    # 101 tokens decoded at 100 tok/s over 1 s, then 11 tokens at 10 tok/s over 1 s: 110 tokens in 2 s.
    events = turn(0.0, 0.5, 1.5, 101) + turn(2.0, 2.5, 3.5, 11) + [loop_end(3.5, "t", 2)]
    m = loop_metrics(events)
    assert [t.decode_tok_s for t in m.turns] == [100.0, 10.0]
    assert m.decode_tok_s == pytest.approx(55.0)
    assert m.output_tokens == 112 and m.ok


def test_model_share_counts_the_waits_of_model_requests_but_not_a_scenarios_wait_step() -> None:
    events = [*turn(0.0, 1.0, 2.0, 10), Segment(t=2.0, seg="wait", start=2.0, end=6.0, label="rollout"),
              *turn(6.0, 7.0, 8.0, 10), loop_end(8.0, "t", 2)]
    m = loop_metrics(events)
    # one word, one meaning: the model's wait for its first token is "pending"; "wait" is the scenario's step alone
    assert m.breakdown == {"pending": 2.0, "model": 2.0, "wait": 4.0}
    assert m.model_parts == {"pending": 2.0, "model": 2.0}
    assert m.model_s == 4.0 and m.model_share == 0.5 and m.amdahl_max_speedup == 2.0
    parts = bottlenecks([("lane", m)])[0].parts
    assert [(k, s) for k, s, _ in parts] == [("model", 4.0), ("wait", 4.0)]


def test_the_what_if_speeds_up_only_the_model_time() -> None:
    events = [*turn(0.0, 1.0, 4.0, 10), Segment(t=4.0, seg="tool", start=4.0, end=10.0), loop_end(10.0, "t", 1)]
    m = loop_metrics(events)
    what = m.what_if(4)
    assert (what.e2e_s, what.saved_s, what.sooner_pct) == (7.0, 3.0, 30.0)
    assert m.amdahl_max_speedup == pytest.approx(10 / 6)


def test_the_amdahl_bound_is_none_when_the_model_is_the_whole_loop() -> None:
    m = loop_metrics([*turn(0.0, 1.0, 2.0, 10), loop_end(2.0, "t", 1)])
    assert m.model_share == 1.0 and m.amdahl_max_speedup is None


def test_overlapping_tool_spans_count_once_and_a_gap_goes_to_the_kind_before_it() -> None:
    spans = [SegmentSpan("model", 0.0, 1.0), SegmentSpan("tool", 1.0, 3.0), SegmentSpan("tool", 1.0, 5.0),
             SegmentSpan("model", 5.001, 6.0)]
    parts = breakdown(spans, 0.0, 6.0)
    assert parts == pytest.approx({"model": 1.999, "tool": 4.001})
    assert sum(parts.values()) == pytest.approx(6.0, abs=1e-12)


def test_a_lane_that_fails_mid_loop_is_not_ok_and_ends_at_its_error() -> None:
    events = [*turn(0.0, 1.0, 2.0, 10), Segment(t=2.0, seg="tool", start=2.0, end=3.0),
              Request(t=3.0, turn=1), Error(t=3.5, error="http", message="503 from the server")]
    m = loop_metrics(events)
    assert not m.ok and m.error == "503 from the server" and m.e2e_s == 3.5


def test_a_loop_without_its_end_event_never_ended() -> None:
    m = loop_metrics(turn(0.0, 1.0, 2.0, 10))
    assert not m.ok and m.error is not None and "never ended" in m.error


def test_the_json_run_of_a_scenario_adds_exactly_the_loop_keys() -> None:
    result = demo("research")
    run = report(result)["tiers"][0]["runs"][0]
    plain = asyncio.run(run_session(demo_tiers()[:1], TurnRequest(prompt="Why?", max_tokens=20), fast_forward=True))
    assert set(run) - set(report(plain)["tiers"][0]["runs"][0]) == LOOP_KEYS
    assert len(run["turns"]) == 8 and {"kind", "label", "start_s", "end_s"} == set(run["segments"][0])
    assert run["model_share"] == pytest.approx(loops(result)[0].model_share, abs=1e-6)
    json.dumps(run)


def test_replaying_a_scenario_recording_gives_the_live_loop_metrics(tmp_path: Path) -> None:
    path = tmp_path / "loop.jsonl"
    recorder = Recorder(path, "incident", demo_tiers(), scenario="incident")
    live = race_demo("incident", [recorder])
    recorder.close()
    recording = read_recording(path)
    assert recording.header["scenario"] == "incident"
    replayed = asyncio.run(run_session(replay_tiers(recording), TurnRequest(prompt=""), fast_forward=True,
                                       loop=True))
    assert replayed.all_ok
    assert without_started_at([m[0].to_json() for m in replayed.metrics]) == \
        without_started_at([m[0].to_json() for m in live.metrics])


def test_the_representative_run_is_the_median_successful_loop() -> None:
    runs = [loop_metrics([*turn(0.0, 1.0, e, 10), loop_end(e, "t", 1)]) for e in (5.0, 3.0, 9.0)]
    failed = loop_metrics(turn(0.0, 1.0, 2.0, 10))
    chosen = representative([failed, *runs])
    assert chosen is not None and chosen.e2e_s == 5.0
    assert representative([failed]) is failed


def test_bottlenecks_compare_every_lane_with_the_slowest_token_rate() -> None:
    slow = loop_metrics([*turn(0.0, 1.0, 11.0, 101), Segment(t=11.0, seg="tool", start=11.0, end=21.0),
                         loop_end(21.0, "t", 1)])
    fast = loop_metrics([*turn(0.0, 0.1, 1.1, 1001), Segment(t=1.1, seg="tool", start=1.1, end=11.1),
                         loop_end(11.1, "t", 1)])
    rows: list[Bottleneck] = bottlenecks([("fast", fast), ("slow", slow)], factor=10)
    assert [r.name for r in rows] == ["fast", "slow"]
    assert rows[0].token_speedup == pytest.approx(100.0) and rows[0].e2e_speedup == pytest.approx(21 / 11.1)
    assert rows[1].token_speedup == 1.0 and rows[1].what_if.factor == 10
    assert rows[1].parts[0][:2] == ("model", 11.0) and rows[1].model_parts == {"pending": 1.0, "model": 10.0}


def test_with_one_lane_finished_no_speed_up_is_given_against_itself() -> None:
    done = loop_metrics([*turn(0.0, 0.1, 1.1, 1001), loop_end(1.1, "t", 1)])
    stopped = loop_metrics([*turn(0.0, 1.0, 3.0, 21), Error(t=3.0, error="stopped", message="stopped")])
    rows = bottlenecks([("ultrafast", done), ("standard", stopped)])
    assert [(r.e2e_speedup, r.token_speedup) for r in rows] == [(None, None), (None, None)]


def test_a_what_if_never_reads_as_an_impossible_zero() -> None:
    from tokrace.providers.export.tables import what_if_cell

    only_model = loop_metrics([*turn(0.0, 0.2, 0.71, 400), loop_end(0.71, "t", 1)])
    assert what_if_cell(only_model.what_if(1000)) == "1 ms −99.9%"
    assert what_if_cell(only_model.what_if(14)) == "0.1 s −93%"
