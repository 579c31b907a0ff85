"""The proxy's live model: a lane per session lane, a running breakdown, and each --on tier's session re-timed."""

from __future__ import annotations

import pytest
from proxying import scripted_session

from tokrace.providers.proxy.live import LiveProxy
from tokrace.providers.traces.retime import TierProfile

FAST = TierProfile(name="Sol ultrafast", ttft_s=0.2, tok_s=400.0)


def fed(until: float, profiles: tuple[TierProfile, ...] = (FAST,)) -> LiveProxy:
    live = LiveProxy(profiles)
    for lane, event in scripted_session(until):
        live(lane, event)
    return live


def test_each_session_lane_is_a_live_lane_named_for_its_session_and_model() -> None:
    live = fed(30.0)
    assert [lane.tier.name for lane in live.lanes] == ["session 1 · lane 1", "session 1 · lane 2"]
    assert [lane.tier.model for lane in live.lanes] == ["claude-sonnet", "claude-haiku"]
    assert live.calls() == 4 and live.lanes[0].state_at(30.0) == "streaming"
    assert live.tokens() == (36_000, 120 + 20 + 200 + live.lanes[0].turns[-1].tokens())


def test_the_breakdown_counts_model_tool_and_human_time_as_it_grows() -> None:
    live = fed(30.0)
    parts = live.breakdown(30.0)
    assert parts["tool"] == pytest.approx(4.0) and parts["human"] == pytest.approx(6.0)
    # the main lane from its start to now (a call in flight), the side lane until its call ended
    assert sum(parts.values()) == pytest.approx(30.0 + 0.4 + 20 / 120.0)
    assert live.lanes[1].state_at(30.0) == "idle"


def test_while_no_call_runs_the_time_since_the_last_is_the_persons_after_an_end_of_turn() -> None:
    live = fed(15.0)  # the second call ended at 11.7 s, the person has been reading since
    end = 1.2 + 2.0 + 4.0 + 0.9 + 200 / 55.0
    assert live.breakdown(15.0)["human"] == pytest.approx(15.0 - end)
    assert live.lanes[0].state_at(15.0) == "human"


def test_an_on_tier_retimes_the_finished_calls_and_keeps_the_call_in_flight_as_measured() -> None:
    live = fed(30.0)
    (verdict,) = live.verdicts(30.0)
    # measured: 1.2 + 2 s, tool 4 s, 0.9 + 3.64 s, person 6 s, then in flight until 30 s
    first_end = 1.2 + 120 / 60.0
    second_end = first_end + 4.0 + 0.9 + 200 / 55.0
    saved = (first_end - (0.2 + 120 / 400)) + ((second_end - first_end - 4.0) - (0.2 + 200 / 400))
    assert verdict.measured_s == 30.0
    assert abs(verdict.retimed_s - (30.0 - saved)) < 1e-6
    assert verdict.sentence() == f"on Sol ultrafast this session would be at {30.0 - saved:.1f} s of 30.0"
    lane = live.retimed[0].lane
    assert lane.tier.name == "on Sol ultrafast" and len(lane.turns) == 3  # two re-timed, one in flight
    assert max(s.end for s in lane.segments(30.0)) == pytest.approx(30.0 - saved)


def test_a_long_session_reads_in_minutes() -> None:
    live = fed(130.0)
    assert live.verdicts(130.0)[0].sentence().endswith("min of 2.2")
