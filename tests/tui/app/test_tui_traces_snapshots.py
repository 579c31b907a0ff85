"""How an imported agent trace looks on the race screen, pinned as SVG snapshots (update with --snapshot-update)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from paths import TRACE_FIXTURES
from textual.pilot import Pilot
from tui_harness import replay_app

from tokrace.providers.traces.read import read_file
from tokrace.providers.traces.to_events import write_recording

WIDE = (160, 45)
SMALL = (80, 24)
SESSION = TRACE_FIXTURES / "claude-code" / "session-a.jsonl"

Compare = Callable[..., bool]


def trace_app(tmp_path: Path, session: Path = SESSION) -> tuple[object, Callable[[float, tuple[str, ...]], Callable[
        [Pilot[object]], Awaitable[None]]]]:
    app, base, _control = replay_app(write_recording(list(read_file(session).traces), tmp_path / "trace.jsonl"))

    def moment(t: float, keys: tuple[str, ...]) -> Callable[[Pilot[object]], Awaitable[None]]:
        async def run_before(pilot: Pilot[object]) -> None:
            await pilot.app.runner.wait_started()  # type: ignore[attr-defined]
            await base.advance_to(t)
            await pilot.press("space", *keys)  # paused: the frame no longer moves

        return run_before

    return app, moment


def test_trace_replay_with_a_subagent_wide(snap_compare: Compare, tmp_path: Path) -> None:
    app, moment = trace_app(tmp_path)
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(21.0, ()))


def test_trace_replay_with_a_subagent_80x24(snap_compare: Compare, tmp_path: Path) -> None:
    app, moment = trace_app(tmp_path)
    assert snap_compare(app, terminal_size=SMALL, run_before=moment(21.0, ()))


def test_trace_bottleneck_view_final_wide(snap_compare: Compare, tmp_path: Path) -> None:
    app, moment = trace_app(tmp_path)
    assert snap_compare(app, terminal_size=WIDE, run_before=moment(700.0, ("b",)))


def test_trace_bottleneck_view_of_a_sub_agent_beside_the_person_80x24(snap_compare: Compare, tmp_path: Path) -> None:
    # the critical path's parts, as tokrace traces gives them: the person's 60 s stay human (the sub-agent's call
    # beside them is parallel work), not 51 s as counting what plays would give
    app, moment = trace_app(tmp_path, TRACE_FIXTURES / "claude-code" / "session-background.jsonl")
    assert snap_compare(app, terminal_size=SMALL, run_before=moment(100.0, ("b",)))


def test_trace_bottleneck_view_mid_way_says_the_bound_is_so_far_80x24(snap_compare: Compare, tmp_path: Path) -> None:
    # 20 s in: the path so far, and a bound from the time so far (the measured one comes with the trace's end)
    app, moment = trace_app(tmp_path, TRACE_FIXTURES / "claude-code" / "session-background.jsonl")
    assert snap_compare(app, terminal_size=SMALL, run_before=moment(20.0, ("b",)))
