"""Replay: a recorded lane played with its original timing reproduces the live metrics; speed and idle cap."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from conftest import synthetic
from wall_clock import without_started_at

from tokrace.providers.adapters.replay import ReplayProvider, replay_pace, replay_tiers
from tokrace.providers.metrics.turn import TurnMetrics
from tokrace.providers.model.errors import ConfigError
from tokrace.providers.model.events import Delta, Segment
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import Price, TierSpec
from tokrace.providers.recording import Recorder, read_recording
from tokrace.providers.runs.session import SessionResult, run_session
from tokrace.providers.timing.clock import VirtualClock
from tokrace.providers.timing.retimed import Retimer

TIERS = [
    synthetic("standard", model="gpt-5.6-sol", price=Price(input=5, output=30), ttft_ms=900, tok_s=54, jitter=0.15,
              seed=1),
    synthetic("thinker", thinking_tokens=20, thinking_tok_s=400, ttft_ms=300, tok_s=150, tokens_per_event=2),
    synthetic("flaky", tok_s=300, fail_after_tokens=12),
]


def session(tiers: list[TierSpec], runs: int = 1, record: Path | None = None,
            max_tokens: int = 60) -> SessionResult:
    recorder = Recorder(record, "Why?", tiers) if record is not None else None

    def on_start(run: int) -> None:
        if recorder is not None:
            recorder.run = run

    result = asyncio.run(run_session(tiers, TurnRequest("Why?", max_tokens=max_tokens), runs=runs,
                                     fast_forward=True, listeners=[recorder] if recorder else [],
                                     on_run_start=on_start))
    if recorder is not None:
        recorder.close()
    return result


def runs_json(result: SessionResult) -> list[list[dict[str, Any]]]:
    return without_started_at([[m.to_json() for m in lane] for lane in result.metrics])


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, SessionResult]:
    path = tmp_path / "live.jsonl"
    return path, session(TIERS, record=path)


def test_replay_reproduces_the_live_metrics_exactly_on_virtual_time(recorded: tuple[Path, SessionResult]) -> None:
    path, live = recorded
    replayed = session(replay_tiers(read_recording(path)))
    assert runs_json(replayed) == runs_json(live)
    assert [lane.events for lane in replayed.runs[0]] == [lane.events for lane in live.runs[0]]


def test_replay_tiers_are_named_modelled_and_priced_like_the_originals(recorded: tuple[Path, SessionResult]) -> None:
    path, _ = recorded
    tiers = replay_tiers(read_recording(path), speed=2.0, idle_cap=0.5)
    assert [(t.name, t.provider, t.model) for t in tiers] == [("standard", "replay", "gpt-5.6-sol"),
                                                             ("thinker", "replay", ""), ("flaky", "replay", "")]
    assert tiers[0].price == Price(input=5, output=30)
    assert tiers[1].options == {"file": str(path), "lane": 1, "speed": 2.0, "idle_cap": 0.5,
                                "recorded_provider": "synthetic"}


def test_a_speed_factor_changes_the_waiting_never_the_figures(recorded: tuple[Path, SessionResult]) -> None:
    path, live = recorded
    fast = session(replay_tiers(read_recording(path), speed=4.0))
    assert runs_json(fast) == runs_json(live)


def test_the_idle_cap_changes_the_waiting_never_the_figures(tmp_path: Path) -> None:
    path = tmp_path / "slow.jsonl"
    live = session([synthetic("slow start", ttft_ms=5000, ttfb_ms=100, tok_s=100)], record=path, max_tokens=20)
    capped = session(replay_tiers(read_recording(path), idle_cap=0.5))
    assert capped.metrics[0][0].ttft_s == live.metrics[0][0].ttft_s == 5.0
    assert runs_json(capped) == runs_json(live)


def test_a_paced_replay_waits_less_and_stamps_the_recorded_times(tmp_path: Path) -> None:
    path = tmp_path / "slow.jsonl"
    live = session([synthetic("slow start", ttft_ms=5000, ttfb_ms=100, tok_s=100)], record=path, max_tokens=20)
    recording = read_recording(path)
    pace = replay_pace(recording, speed=2.0, idle_cap=0.5)
    assert pace is not None and replay_pace(recording) is None
    base = VirtualClock()

    async def play() -> SessionResult:
        return await run_session(replay_tiers(recording), TurnRequest("Why?"), pace=lambda run, clock: pace(run, base),
                                 providers=None)

    result = asyncio.run(base.drive(play()))
    assert runs_json(result) == runs_json(live)
    # 5 s of silence plays in 0.5 s, and everything at twice the speed: 0.05 + 0.25 + 0.1 instead of 5.2 s.
    assert base.now() == pytest.approx((0.1 + 0.5 + (live.metrics[0][0].e2e_s - 5.0)) / 2.0)  # type: ignore[operator]


def test_retimer_maps_times_through_speed_and_cap_both_ways() -> None:
    retime = Retimer([0.0, 1.0, 1.1, 4.1], speed=2.0, idle_cap=1.0)
    assert [retime(t) for t in (0.0, 1.0, 1.1, 4.1)] == pytest.approx([0.0, 0.5, 0.55, 1.05])
    assert retime(2.6) == pytest.approx(0.55 + 0.25)  # halfway through the squeezed pause, halfway played
    assert retime(5.1) == pytest.approx(1.55)  # after the last moment, at the speed
    for t in (0.0, 0.3, 1.05, 2.6, 4.1, 7.0):
        assert retime.recorded(retime.played(t)) == pytest.approx(t)
    assert Retimer([0.0, 3.0])(3.0) == 3.0
    assert retime.squeezes and not Retimer([0.0, 1.0, 2.0], idle_cap=1.0).squeezes


def test_segments_keep_their_recorded_times_when_played_faster(tmp_path: Path) -> None:
    path = tmp_path / "seg.jsonl"
    recorder = Recorder(path, "Why?", [synthetic("s")])
    from tokrace.providers.model.events import Done, Request

    for event in (Request(t=0.0), Segment(t=2.0, seg="tool", start=0.0, end=2.0, label="pytest"),
                  Delta(t=2.5, text="ok"), Done(t=2.5)):
        recorder(0, event)
    recorder.close()
    replayed = session(replay_tiers(read_recording(path), speed=2.0))
    segment = next(e for e in replayed.runs[0][0].events if isinstance(e, Segment))
    assert (segment.t, segment.start, segment.end) == (2.0, 0.0, 2.0)


def test_every_recorded_run_is_replayed_in_turn(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    live = session([synthetic("j", tok_s=100, jitter=0.3, seed=8)], runs=3, record=path, max_tokens=10)
    rec = read_recording(path)
    assert rec.runs == 3
    replayed = session(replay_tiers(rec), runs=3)
    assert runs_json(replayed) == runs_json(live)
    only = session(replay_tiers(rec, run=2))
    assert runs_json(only) == [[runs_json(live)[0][2]]]


def test_a_failed_lane_replays_as_the_same_failure(recorded: tuple[Path, SessionResult]) -> None:
    path, live = recorded
    replayed = session(replay_tiers(read_recording(path)))
    failed: TurnMetrics = replayed.metrics[2][0]
    assert not failed.ok and failed.error == live.metrics[2][0].error
    assert not replayed.all_ok


def test_a_truncated_recording_replays_what_it_has_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    session([synthetic("a", tok_s=100), synthetic("b", tok_s=50)], record=path, max_tokens=10)
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) - 20], encoding="utf-8")
    replayed = session(replay_tiers(read_recording(path)))
    assert len(replayed.warnings) == 1 and "incomplete" in replayed.warnings[0]
    assert replayed.metrics[0][0].ok


def test_a_lane_is_chosen_by_index_or_tier_name(recorded: tuple[Path, SessionResult]) -> None:
    path, live = recorded
    tier = TierSpec(name="again", provider="replay", options={"file": str(path), "lane": "thinker"})
    replayed = session([tier])
    assert runs_json(replayed) == [runs_json(live)[1]]
    missing = TierSpec(name="x", provider="replay", options={"file": str(path), "lane": "nobody"})
    failed = session([missing]).metrics[0][0]  # a tier that cannot be set up fails its lane, as on the screen
    assert not failed.ok and "no lane named 'nobody'" in (failed.error or "")


def test_a_replay_tier_needs_a_file_and_sane_pacing() -> None:
    with pytest.raises(ConfigError, match="needs file"):
        ReplayProvider(TierSpec(name="r", provider="replay"))
    with pytest.raises(ConfigError, match=r"speed must be from 0\.001 to"):
        ReplayProvider(TierSpec(name="r", provider="replay", options={"file": "x", "speed": 0}))
    with pytest.raises(ConfigError, match="idle_cap must be above 0"):
        ReplayProvider(TierSpec(name="r", provider="replay", options={"file": "x", "idle_cap": -1}))
