"""A synthetic loop is planned: every clock, however late it wakes the lanes, gives the same figures."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.loop.scenario_file import load_scenario
from tokrace.providers.metrics.loop import LoopMetrics, loop_metrics
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.race.race import LaneRun, Listener, Race
from tokrace.providers.runs.session import run_session
from tokrace.providers.timing.clock import FAST_FORWARD_GRID_S, VirtualClock


class LateClock:
    """A real-like clock on virtual time whose sleepers wake ``late`` seconds after their deadline (a busy loop, the
    real clock's 32 ms grid), as the real clock does under load."""

    virtual = False

    def __init__(self, base: VirtualClock, late: float) -> None:
        self.base, self.late = base, late

    def now(self) -> float:
        return self.base.now()

    async def sleep_until(self, t: float) -> float:
        return await self.base.sleep_until(max(t, self.base.now()) + self.late)

    async def sleep_until_coarse(self, t: float) -> float:
        return await self.sleep_until(t)


def race_on(late: float, listeners: Sequence[Listener] = ()) -> list[LaneRun]:
    base = VirtualClock()
    race = Race(demo_tiers(), TurnRequest(prompt=""), LateClock(base, late), listeners,
                scenario=load_scenario("coding-loop"))

    async def go() -> list[LaneRun]:
        await race.prepare()
        return await base.drive(race.run())

    return asyncio.run(go())


def figures(lanes: list[LaneRun]) -> list[tuple[float | None, dict[str, float]]]:
    out = []
    for lane in lanes:
        m = loop_metrics(lane.events, lane.tier.price, lane.tier.model)
        assert isinstance(m, LoopMetrics) and m.ok, m.error
        out.append((round(m.e2e_s or 0, 6), {k: round(v, 6) for k, v in m.breakdown.items()}))
    return out


def test_a_synthetic_loop_gives_the_same_figures_however_late_its_lanes_wake() -> None:
    exact = figures(race_on(0.0))
    assert figures(race_on(0.013)) == exact
    assert figures(race_on(0.032)) == exact


def test_fast_forward_gives_the_figures_of_the_exact_clock() -> None:
    result = asyncio.run(run_session(demo_tiers(), TurnRequest(prompt=""), fast_forward=True,
                                     scenario=load_scenario("coding-loop")))
    assert FAST_FORWARD_GRID_S > 0  # fast-forward hands each lane's events over a grid cell at a time
    assert figures(result.runs[0]) == figures(race_on(0.0))


def test_a_loop_raced_late_replayed_and_read_back_from_otlp_has_one_breakdown(tmp_path: Path) -> None:
    from tokrace.providers.export.otlp import to_otlp_json
    from tokrace.providers.export.race_data import replay_recording
    from tokrace.providers.recording import Recorder, read_recording
    from tokrace.providers.traces.analysis import analyse
    from tokrace.providers.traces.read import read_file

    path = tmp_path / "loop.jsonl"
    recorder = Recorder(path, "coding-loop", demo_tiers(), scenario="coding-loop")
    raced = race_on(0.021, [recorder])
    recorder.close()
    source = asyncio.run(replay_recording(read_recording(path)))
    otlp = tmp_path / "loop.otlp.json"
    otlp.write_text(to_otlp_json(source), encoding="utf-8")
    traces = read_file(otlp).traces
    assert figures(source.result.runs[0]) == figures(raced)
    for lane, trace in zip(raced, traces, strict=True):
        m = loop_metrics(lane.events, lane.tier.price, lane.tier.model)
        got = analyse(trace)
        assert abs(got.e2e_s - (m.e2e_s or 0)) < 0.001
        assert abs(got.breakdown["model"] - m.model_s) < 0.001
        for kind in ("tool", "human"):
            assert abs(got.breakdown[kind] - m.breakdown[kind]) < 0.001, kind
        assert got.breakdown["wait"] < 0.001  # no unexplained gap: every step starts where the last one ended
