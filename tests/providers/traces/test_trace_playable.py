"""A trace played as events: the loop metrics of the replayed lane equal the trace analysis (e2e and breakdown),
sub-agents keep rows of their own, and the recording made from a trace replays on the same figures."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tokrace.providers.metrics.loop import bottlenecks, loop_metrics
from tokrace.providers.model.events import Delta, Done, Event, Request, Segment, is_loop_end, path_span
from tokrace.providers.recording import read_recording
from tokrace.providers.traces.analysis import analyse, pieces, without_away
from tokrace.providers.traces.model import MAIN_CHAIN, STEP_KINDS, Step, Trace
from tokrace.providers.traces.read import files, read_file
from tokrace.providers.traces.to_events import trace_events, write_recording

FIXTURES = Path(__file__).parent / "fixtures"
TRACES = [t for p in files([FIXTURES]) for t in read_file(p).traces]


@pytest.mark.parametrize("trace", TRACES, ids=[f"{Path(t.file).name}:{t.session[:8]}" for t in TRACES])
def test_the_replayed_lane_has_the_figures_of_the_trace_along_its_critical_path(trace: Trace) -> None:
    a = analyse(trace)
    m = loop_metrics(trace_events(trace))
    assert m.ok
    assert m.e2e_s == pytest.approx(a.e2e_s, abs=1e-9)
    b = bottlenecks([("trace", m)])[0]
    parts = {kind: seconds for kind, seconds, _ in b.parts}
    assert sum(parts.values()) == pytest.approx(a.e2e_s, abs=1e-9)
    for kind in STEP_KINDS:  # sub-agents or not: the critical path's breakdown (docs/traces.md)
        assert parts.get(kind, 0.0) == pytest.approx(a.breakdown[kind], abs=1e-6), kind
    assert b.model_share == pytest.approx(a.model_share, abs=1e-9)
    assert b.amdahl_max_speedup == pytest.approx(a.amdahl_max_speedup)
    assert m.output_tokens == sum(s.output_tokens or 0 for s in trace.steps if s.kind == "model" and s.chain == "main")


def test_some_fixtures_have_one_chain_and_some_run_work_off_the_critical_path() -> None:
    single = [t for t in TRACES if all(s.chain == MAIN_CHAIN for s in t.steps)]
    assert len(single) >= 3 and len(TRACES) - len(single) >= 3
    assert any(sum(analyse(t).parallel_s.values()) > 1 for t in TRACES)


def bottleneck_parts(events: list[Event]) -> dict[str, float]:
    return {kind: s for kind, s, _ in bottlenecks([("t", loop_metrics(events))])[0].parts}


def test_a_sub_agent_beside_the_person_plays_on_its_row_and_b_counts_the_critical_path() -> None:
    trace = read_file(FIXTURES / "claude-code" / "session-background.jsonl").traces[0]
    a = analyse(trace)
    events = trace_events(trace)
    assert a.breakdown["human"] == 60.0 and a.parallel_s["model"] == 10.0  # the person sets the wall time
    assert any(isinstance(e, Segment) and e.chain is not None and e.seg == "model" for e in events)  # its row
    parts = bottleneck_parts(events)
    assert parts == pytest.approx({k: v for k, v in a.breakdown.items() if v > 1e-9})
    # by precedence over what plays, the sub-agent's model call would have taken 9 s of the person's minute
    played = {p.kind: p.end - p.start for p in pieces(without_away(trace)) if p.kind == "human"}
    assert played["human"] == pytest.approx(51.0)


def test_the_replayed_sub_agent_trace_on_every_tier_has_the_figures_of_traces_on(tmp_path: Path) -> None:
    from tokrace.providers.traces.compare import compare
    from tokrace.providers.traces.retime import TierProfile, retime_on

    trace = read_file(FIXTURES / "claude-code" / "session-background.jsonl").traces[0]
    tiers = [TierProfile("slow", ttft_s=2.0, tok_s=5.0), TierProfile("instant", ttft_s=0.0, tok_s=float("inf"))]
    row = compare([trace], tiers).rows[0]
    for tier in tiers:
        on = row.on[tier.name]
        parts = bottleneck_parts(trace_events(retime_on(trace, tier)))
        for kind in STEP_KINDS:
            assert parts.get(kind, 0.0) == pytest.approx(on.breakdown[kind], abs=1e-6), (tier.name, kind)
        assert on.breakdown["human"] == pytest.approx(60.0)


def test_the_live_lane_counts_the_critical_path_as_it_plays() -> None:
    from tokrace.providers.model.tiers import TierSpec
    from tokrace.providers.race.live import LiveLane

    trace = read_file(FIXTURES / "claude-code" / "session-background.jsonl").traces[0]
    events = trace_events(trace)
    lane = LiveLane(TierSpec(name="t", provider="replay", model="m"), expected_turns=None, loop=True)
    for e in events:
        lane.on_event(e)
    final = loop_metrics(events)
    live = lane.loop_so_far(events[-1].t)
    assert live.breakdown == pytest.approx(final.breakdown) and live.model_s == pytest.approx(final.model_s)
    assert live.amdahl_max_speedup == pytest.approx(final.amdahl_max_speedup)
    halfway = lane.loop_so_far(20.0)
    assert sum(halfway.breakdown.values()) == pytest.approx(halfway.e2e_s or 0.0)


def test_a_malformed_critical_path_event_is_ignored() -> None:
    from tokrace.providers.model.events import Extra

    assert path_span(Extra(t=0, source="critical path", data={"seg": "model", "start": "x", "end": 2})) is None
    assert path_span(Extra(t=0, source="critical path", data={"seg": "bogus", "start": 0, "end": 2})) is None
    assert path_span(Extra(t=0, source="critical path", data={"seg": "tool", "start": 3, "end": 2})) is None
    assert path_span(Extra(t=0, source="critical path", data={"seg": "tool", "start": 0,
                                                               "end": float("nan")})) is None
    assert path_span(Extra(t=0, source="critical path", data={"seg": "tool", "start": 0, "end": 2})) == \
        ("tool", 0.0, 2.0)


def test_model_steps_stream_their_tokens_evenly_after_the_recorded_ttft() -> None:
    trace = Trace("t", "test", steps=[Step("m", "model", 0.0, 5.0, output_tokens=40, ttft_s=1.0, model="x")])
    events = [e for e in trace_events(trace) if path_span(e) is None]
    assert isinstance(events[0], Request) and events[0].t == 0.0
    deltas = [e for e in events if isinstance(e, Delta)]
    assert deltas[0].t == 1.0 and deltas[-1].t == 5.0
    gaps = {round(b.t - a.t, 9) for a, b in itertools.pairwise(deltas)}
    assert len(gaps) == 1  # even
    assert sum(d.tokens or 0 for d in deltas) == 40
    assert isinstance(events[-2], Done) and is_loop_end(events[-1]) and events[-1].t == 5.0


def test_subagent_steps_are_segments_on_their_own_chain_with_labels() -> None:
    trace = Trace("t", "test", steps=[
        Step("m1", "model", 0, 1, output_tokens=3),
        Step("task", "tool", 1, 9, label="sub-agent"),
        Step("s1", "model", 1.5, 4, chain="sub-1", model="haiku"),
        Step("s2", "tool", 4, 6, chain="sub-1", label="Grep", includes_approval=True),
        Step("p1", "model", 1.5, 3, chain="sub-2"),
        Step("h", "human", 9, 20, label="person"),
        Step("m2", "model", 20, 21, output_tokens=2)])
    segs = [(e.seg, e.label, e.chain) for e in trace_events(trace) if isinstance(e, Segment)]
    assert ("tool", "sub-agent", None) in segs
    assert ("model", "sub-agent · haiku", "sub-1") in segs and ("tool", "Grep (+approval)", "sub-1") in segs
    assert ("model", "sub-agent", "sub-2") in segs and ("human", "person", None) in segs


def test_away_time_is_cut_from_the_replay() -> None:
    trace = Trace("t", "test", steps=[Step("m1", "model", 0, 2, output_tokens=5), Step("h", "human", 2, 3602),
                                      Step("m2", "model", 3602, 3603, output_tokens=5)])
    events = trace_events(trace, idle_cap_s=600)
    assert events[-1].t == 603.0


def test_a_recording_of_traces_replays_one_lane_per_trace(tmp_path: Path) -> None:
    found = read_file(FIXTURES / "otlp/collector-export.jsonl")
    path = write_recording(list(found.traces), tmp_path / "t.jsonl")
    rec = read_recording(path)
    assert [t["name"] for t in rec.tiers] == ["conv-42", "b" * 23 + "…"]
    assert rec.header["scenario"] == "otlp trace"
    for lane, trace in enumerate(found.traces):
        assert loop_metrics(rec.lane_events(lane)).e2e_s == pytest.approx(analyse(trace).e2e_s)
