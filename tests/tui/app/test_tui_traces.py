"""An imported agent trace on the race screen: it plays as a lane (tools, people and sub-agents with their labels,
sub-agents on rows of their own under the lane) and its bottleneck view (b) shows the trace analysis' figures."""

from __future__ import annotations

from pathlib import Path

import pytest
from paths import TRACE_FIXTURES as FIXTURES
from textual.pilot import Pilot
from tui_harness import replay_app, text_of

from tokrace.providers.traces.analysis import analyse
from tokrace.providers.traces.read import read_file
from tokrace.providers.traces.to_events import write_recording
from tokrace.tui.app.widgets.bottleneck import BottleneckView
from tokrace.tui.app.widgets.lane import LaneView

SESSION = FIXTURES / "claude-code" / "session-a.jsonl"


def trace_recording(tmp_path: Path, path: Path = SESSION) -> Path:
    return write_recording(list(read_file(path).traces), tmp_path / "trace.jsonl")


async def advance(pilot: Pilot[object], base: object, t: float) -> None:
    await pilot.app.runner.wait_started()  # type: ignore[attr-defined]
    await base.advance_to(t)  # type: ignore[attr-defined]
    pilot.app.screen.sample(force=True)  # type: ignore[attr-defined]
    await pilot.pause()


def badge(app: object) -> tuple[str, str]:
    lane = app.screen.query_one("#lane-0", LaneView)  # type: ignore[attr-defined]
    return lane._state, lane.lane.detail


async def test_the_trace_plays_with_its_tools_people_and_subagents(tmp_path: Path) -> None:
    app, base, _control = replay_app(trace_recording(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await advance(pilot, base, 5.0)
        assert badge(app) == ("tool", "Bash (+approval)")
        await advance(pilot, base, 21.0)  # the sub-agent's Grep ran 19-20 s; the Task (sub-agent) runs to 24 s
        timeline = app.screen.timeline
        labels = {(row.track, s.label) for row in timeline.rows for s in row.spans}
        assert (1, "sub-agent · claude-haiku-4-5") in labels or (2, "sub-agent · claude-haiku-4-5") in labels
        sub_rows = [i for i, row in enumerate(timeline.rows) if any(s.chain for s in row.spans)]
        assert sub_rows and all(timeline.rows[i].track > 0 for i in sub_rows)
        assert "└ sub-agent" in timeline.render_line(sub_rows[0]).text
        await advance(pilot, base, 100.0)
        assert badge(app) == ("human", "person")


async def test_b_shows_the_trace_analysis_figures_with_approval_in_the_tool_time(tmp_path: Path) -> None:
    a = analyse(read_file(SESSION).traces[0])
    app, base, _control = replay_app(trace_recording(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await advance(pilot, base, 700.0)
        await pilot.press("b")
        bn = app.screen.query_one(BottleneckView)
        assert bn.final
        row = bn.rows[0]
        assert row.e2e_s == pytest.approx(a.e2e_s)
        parts = {kind: s for kind, s, _ in row.parts}
        for kind in ("model", "tool", "human", "retry"):
            assert parts[kind] == pytest.approx(a.breakdown[kind])
        body = text_of(bn.body)
        assert "claude-code trace · final" in body and "tool (+approval)" in body


async def test_a_file_of_several_traces_plays_a_lane_each(tmp_path: Path) -> None:
    path = trace_recording(tmp_path, FIXTURES / "otlp" / "collector-export.jsonl")
    app, base, _control = replay_app(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await advance(pilot, base, 30.0)
        lanes = app.runner.live.lanes
        assert [lane.tier.name for lane in lanes] == ["conv-42", "b" * 23 + "…"]
        assert all(lane.finished for lane in lanes)
