"""The screen records every race it starts: a new file per race, replayable with the same metrics, never a key,
and a recording that cannot be written is one notification, never a crash."""

from __future__ import annotations

import asyncio
import datetime as dt
import errno
import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Timeline
from textual.widgets import Input
from tui_harness import factory
from wall_clock import without_started_at

from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.model.events import Delta, Done, Error, Request
from tokrace.providers.model.masking import redact
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.recording import Recorder, default_path, event_line, read_recording, recordings_dir
from tokrace.providers.runs import record_paths as record
from tokrace.providers.runs import runner
from tokrace.providers.runs.record_paths import FLUSH_EVERY_S, RecordPlan
from tokrace.providers.runs.session import lane_metrics
from tokrace.providers.timing.clock import VirtualClock
from tokrace.tui import main as cli
from tokrace.tui.app import launch
from tokrace.tui.app.app import TokraceApp, build_app

MAX_TOKENS = 60
"""Short demo races: enough tokens for every metric, quick on virtual time."""


def recording_app(plan: RecordPlan | None, tiers: list[TierSpec] | None = None,
                  prompt: str = "Why is the bottleneck moving?") -> tuple[TokraceApp, VirtualClock]:
    """The screen on virtual time, recording (or not) as ``plan`` says."""
    clock = VirtualClock()
    app = build_app(tiers if tiers is not None else demo_tiers(), TurnRequest(prompt, MAX_TOKENS),
                    clock_factory=lambda: clock, provider_factory=factory, animate=False, freeze_gc=False,
                    record=plan)
    return app, clock


async def race_to_the_end(app: TokraceApp, clock: VirtualClock) -> None:
    """Start (or let start) the race, then move virtual time until it is over."""
    await app.runner.wait_started()
    while app.runner.running:
        await clock.advance(0.5)
    await app.runner.wait_finished()


async def race_again(app: TokraceApp, clock: VirtualClock, keys: Callable[[], Any]) -> None:
    races = app.runner.races
    await keys()
    await app.workers.wait_for_complete()
    assert app.runner.races == races + 1
    await race_to_the_end(app, clock)


def notes(app: TokraceApp) -> list[tuple[str, str, str]]:
    return [(n.severity, n.title, n.message) for n in app._notifications]


def flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    """A nested JSON object as ``{"a.b.c": value}``."""
    if isinstance(obj, dict):
        return {k: v for key, value in obj.items() for k, v in flat(value, f"{prefix}{key}.").items()}
    if isinstance(obj, list):
        return {k: v for i, value in enumerate(obj) for k, v in flat(value, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): obj}


def test_a_demo_race_on_screen_records_a_file_that_replays_with_the_same_metrics(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "talk.jsonl"
    app, clock = recording_app(RecordPlan(path))

    async def race_on_screen() -> None:
        async with app.run_test(size=(160, 45)) as pilot:
            await race_to_the_end(app, clock)
            await pilot.pause()
            assert any(note[1] == "Recorded" and note[2].endswith("talk.jsonl") and str(path) not in note[2]
                       for note in notes(app))

    asyncio.run(race_on_screen())
    race = app.runner.race
    assert race is not None and app.runner.recorded == [path]
    live = [without_started_at(lane_metrics(run).to_json()) for run in race.lanes]

    assert cli.main(["replay", str(path), "--headless", "--json", "-", "--fast-forward"]) == 0
    replayed = [without_started_at(tier["runs"][0]) for tier in json.loads(capsys.readouterr().out)["tiers"]]
    assert [r["output_tokens"] for r in replayed] == [MAX_TOKENS] * 3
    for was, now in zip(live, replayed, strict=True):
        was_flat, now_flat = flat(was), flat(now)
        assert now_flat.keys() == was_flat.keys()
        for key, value in was_flat.items():
            if isinstance(value, float):
                assert now_flat[key] == pytest.approx(value, rel=0.01, abs=0.001), key
            else:
                assert now_flat[key] == value, key


async def test_every_race_again_goes_to_a_new_file_named_after_its_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    now = dt.datetime(2026, 5, 4, 3, 2, 1)  # every race in the same second, however busy the machine
    monkeypatch.setattr(record, "default_path", lambda slug, tiers=(): default_path(slug, now, tiers))
    app, clock = recording_app(RecordPlan())
    async with app.run_test(size=(160, 45)) as pilot:
        await race_to_the_end(app, clock)
        await race_again(app, clock, lambda: pilot.press("r"))

        async def edit() -> None:
            await pilot.press("p")
            app.screen.query_one("#prompt", Input).value = "Where does the time go?"
            await pilot.press("enter")

        await race_again(app, clock, edit)
    first, second, third = app.runner.recorded
    assert len({first, second, third}) == 3
    assert all(p.parent == recordings_dir() and p.is_file() for p in (first, second, third))
    tiers = "-sol-standard-sol-priority-sol-ultrafast"  # the tiers raced tell apart races of one prompt
    assert first.name.endswith(f"-why-is-the-bottleneck-moving{tiers}.jsonl")
    assert second.stem.startswith(first.stem)  # the same second: the same name, numbered
    assert third.name.endswith(f"-where-does-the-time-go{tiers}.jsonl")
    assert read_recording(third).prompt == "Where does the time go?"


async def test_record_file_takes_the_first_race_and_the_next_free_numbered_files_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "talk.jsonl"
    path.write_text("an older talk\n")
    older = tmp_path / "talk-2.jsonl"
    older.write_text("kept\n")
    app, clock = recording_app(RecordPlan(path))
    async with app.run_test(size=(160, 45)) as pilot:
        await race_to_the_end(app, clock)
        await race_again(app, clock, lambda: pilot.press("r"))
        await race_again(app, clock, lambda: pilot.press("r"))
    assert app.runner.recorded == [path, tmp_path / "talk-3.jsonl", tmp_path / "talk-4.jsonl"]
    assert older.read_text() == "kept\n"
    assert read_recording(path).lane_events(2)[-1].kind == "done"


async def test_a_stopped_race_is_recorded_up_to_the_stop() -> None:
    app, clock = recording_app(RecordPlan())
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        await clock.advance(0.9)
        await pilot.press("s")
        await app.runner.wait_finished()
    (path,) = app.runner.recorded
    last = [read_recording(path).lane_events(i)[-1] for i in range(3)]
    assert [e.error if isinstance(e, Error) else e.kind for e in last] == ["stopped", "stopped", "done"]


async def test_without_a_plan_nothing_is_written() -> None:
    app, clock = recording_app(None)
    async with app.run_test(size=(160, 45)) as pilot:
        await race_to_the_end(app, clock)
        await race_again(app, clock, lambda: pilot.press("r"))
        assert not [n for n in notes(app) if n[1] == "Recorded"]
    assert app.runner.recorded == [] and not recordings_dir().exists()


async def test_while_racing_the_file_holds_every_event_older_than_one_tick(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    app, clock = recording_app(RecordPlan(path))
    async with app.run_test(size=(160, 45)):
        await app.runner.wait_started()
        await clock.advance(2.0)
        race = app.runner.race
        assert race is not None and app.runner.running
        now = app.runner.now()
        written = read_recording(path)
        for i, lane in enumerate(race.lanes):
            due = [e for e in lane.events if e.t <= now - FLUSH_EVERY_S]
            assert written.lane_events(i)[:len(due)] == due and due
        await race_to_the_end(app, clock)


async def test_on_the_real_clock_the_recorder_is_flushed_on_the_loops_timer_without_spinning(
        tmp_path: Path, timeline: Timeline) -> None:
    """The screen's flusher needs no precise moment: on the real clock each flush is one wake-up of its task, never
    the precise sleep's yielding to the loop for the last fraction of a millisecond (hundreds of passes a second).
    The real clock's time is the test's (``timeline``): the flushes come at once, and as they would."""
    from collections.abc import Generator

    from tokrace.providers.timing.clock import COARSE_WAKE_S, RealClock

    recorder = Recorder(tmp_path / "r.jsonl", "p", demo_tiers(), buffered=True)
    flushes = steps = 0
    flush = recorder.flush
    flushed_at: list[float] = []
    six_flushes = asyncio.Event()

    def counted_flush() -> None:
        nonlocal flushes
        flushes += 1
        flushed_at.append(timeline.now)
        flush()
        if flushes == 6:
            six_flushes.set()

    recorder.flush = counted_flush  # type: ignore[method-assign]

    class Counted:
        """The flusher's coroutine, counting each time it gives the loop back (each wake-up of its task)."""

        def __await__(self) -> Generator[Any, None, None]:
            nonlocal steps
            inner = runner.RaceRunner._flush_every(None, recorder, RealClock())  # type: ignore[arg-type]
            gen = inner.__await__()
            sent = None
            while True:
                yielded = gen.send(sent)
                steps += 1
                sent = yield yielded

    task = asyncio.ensure_future(Counted())
    await asyncio.wait_for(six_flushes.wait(), 10)  # the time out is a hang guard only
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    recorder.close()
    assert flushes >= 1
    assert steps <= flushes + 2
    gaps = [later - earlier for earlier, later in itertools.pairwise(flushed_at)]
    assert gaps == pytest.approx([COARSE_WAKE_S] * (flushes - 1), abs=1e-4)  # on the grid, 32 ms apart


async def test_on_the_real_clock_the_flusher_wakes_on_the_offline_lanes_grid(tmp_path: Path) -> None:
    """On a clock with the lanes' coarse grid (the real clock's ``sleep_until_coarse``) the flusher waits on it, at
    least half a cell ahead each time, so the event loop wakes once for the lanes and the flush."""
    from tokrace.providers.timing.clock import COARSE_WAKE_S

    recorder = Recorder(tmp_path / "r.jsonl", "p", demo_tiers(), buffered=True)
    asked: list[float] = []
    flushed: list[int] = []

    class GridClock:
        virtual = False
        moment = 100.0

        def now(self) -> float:
            return self.moment

        async def sleep_until_coarse(self, t: float) -> float:
            asked.append(t)
            if len(asked) > 3:
                raise asyncio.CancelledError
            self.moment = t + 0.01  # the grid point after it
            return self.moment

    flush = recorder.flush

    def counted_flush() -> None:
        flushed.append(len(asked))
        flush()

    recorder.flush = counted_flush  # type: ignore[method-assign]
    with pytest.raises(asyncio.CancelledError):
        await runner.RaceRunner._flush_every(None, recorder, GridClock())  # type: ignore[arg-type]
    half = COARSE_WAKE_S / 2  # the first grid point at least half a cell ahead: every point, 32 ms apart
    assert asked == pytest.approx([100.0 + half, 100.01 + 2 * half, 100.02 + 3 * half, 100.03 + 4 * half])
    assert flushed == [1, 2, 3]
    recorder.close()


async def test_a_recording_that_cannot_be_opened_is_one_notification_and_the_race_runs(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "talk.jsonl"
    app, clock = recording_app(RecordPlan(path))
    async with app.run_test(size=(160, 45)) as pilot:
        await race_to_the_end(app, clock)
        await pilot.pause()
        (severity, title, message), = notes(app)
        assert (severity, title) == ("error", "Not recorded")
        assert message.startswith(f"{path}: cannot write the recording (") and "not recorded" in message
        assert app.runner.problem is None and all(lane.finished for lane in app.runner.live.lanes)
    assert app.runner.recorded == []


class FullDisk:
    """A file on a disk that has just filled up: every write fails as a full disk does."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


async def test_a_write_that_fails_mid_race_is_one_notification_and_the_race_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class FillsUp(Recorder):
        """The disk fills up once the header is written."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._fh.close()  # type: ignore[union-attr]
            self._fh = FullDisk(self.path)  # type: ignore[assignment]

    monkeypatch.setattr(runner, "Recorder", FillsUp)
    path = tmp_path / "talk.jsonl"
    app, clock = recording_app(RecordPlan(path))
    async with app.run_test(size=(160, 45)) as pilot:
        await race_to_the_end(app, clock)
        await pilot.pause()
        assert notes(app) == [("error", "Recording stopped",
                               f"{path}: cannot write the recording (No space left on device); the recording "
                               "stops here (what it holds replays)")]
        assert all(lane.finished for lane in app.runner.live.lanes)
    assert app.runner.recorded == [] and read_recording(path).events == {}


async def test_no_key_reaches_the_screens_recording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("TOKRACE_TEST_KEY", key)
    leaky = TierSpec(name="leaky", provider="synthetic", model="m", api_key_env="TOKRACE_TEST_KEY",
                     options={"ttft_ms": 100, "tok_s": 100, "text": f"Your key is {key}. The header was "
                                                                     "Authorization: Bearer abcdef0123456789."})
    path = tmp_path / "talk.jsonl"
    app, clock = recording_app(RecordPlan(path), [leaky, *demo_tiers()[2:]], prompt=f"use {key}")
    async with app.run_test(size=(160, 45)):
        await race_to_the_end(app, clock)
    text = path.read_text()
    assert "[redacted]" in text and "TOKRACE_TEST_KEY" in text
    assert key not in text and "abcdef0123456789" not in text


@pytest.mark.parametrize("event", [
    Delta(t=0.1, text="plain"),
    Delta(t=1 / 3, text='quotes " and \\ and\nnew lines\t', tokens=2),
    Delta(t=2.0, text="ünïcödé — “quoted” 🚀\x00\x1f", channel="reasoning", tokens=0),
    Delta(t=12345.678901234, text="", channel="tool_args"),
])
def test_the_fast_delta_line_is_the_json_of_the_event(event: Delta) -> None:
    from tokrace.providers.model.events import event_to_dict

    generic = json.dumps({"lane": 3, "run": 1, **event_to_dict(event)}, ensure_ascii=False, separators=(",", ":"))
    assert event_line(3, 1, event) == generic


@pytest.mark.parametrize("text", [
    '"authorization":"Bearer sk0123456789abcdef"',
    "x-api-key: key0123456789",
    "APİ_KEY=abc0123456789",  # a dotted capital İ: case-insensitive matching takes it for i
    "authorızation: token tok0123456789",  # a dotless ı
    "bearer abcdef0123456789",
])
def test_credentials_are_masked_whatever_the_case(text: str) -> None:
    assert "0123456789" not in redact(text, [])


async def test_a_buffered_recorder_writes_nothing_until_flushed_then_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "talk.jsonl"
    recorder = Recorder(path, "Why?", demo_tiers(), buffered=True)
    header = path.read_text()
    recorder(0, Request(t=0.0))
    recorder(1, Delta(t=0.5, text="Hi", tokens=1))
    assert path.read_text() == header
    recorder.flush()
    assert path.read_text().endswith('"text":"Hi","channel":"content","tokens":1}\n')
    recorder(1, Done(t=0.6))
    recorder.close()
    assert [e.kind for e in read_recording(path).lane_events(1)] == ["delta", "done"]


@pytest.fixture
def screen_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the race screen would have been asked to run, in a terminal."""
    seen: dict[str, Any] = {}

    def run_race(*args: Any, **kwargs: Any) -> int:
        seen["race"] = kwargs
        return 0

    monkeypatch.setattr(launch, "run_race", run_race)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    return seen


@pytest.mark.parametrize("command", [[], ["demo"]])
def test_the_screen_records_by_default_to_a_file_or_not_at_all(screen_calls: dict[str, Any], command: list[str],
                                                                in_tmp: Path) -> None:
    assert cli.main(command) == 0
    plan = screen_calls["race"]["record"]
    assert isinstance(plan, RecordPlan) and plan.path is None
    assert cli.main([*command, "--record", "talk.jsonl"]) == 0
    assert screen_calls["race"]["record"].path == Path("talk.jsonl")
    assert cli.main([*command, "--no-record"]) == 0
    assert screen_calls["race"]["record"] is None


def test_record_and_no_record_together_are_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["demo", "--record", "a.jsonl", "--no-record"])
    assert exit_.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_a_replay_on_screen_is_never_recorded_again(tmp_path: Path) -> None:
    from tokrace.providers.runs.replay_control import ReplayControl

    control = ReplayControl(tmp_path / "r.jsonl", 1.0)
    app = build_app(demo_tiers(), TurnRequest("Why?"), replay=control, record=RecordPlan(tmp_path / "again.jsonl"))
    assert app.runner.record is None


async def test_quitting_mid_race_closes_the_recording_with_what_arrived() -> None:
    app, clock = recording_app(RecordPlan())
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        await clock.advance(0.9)
        await pilot.press("q")
    (path,) = app.runner.recorded
    recording = read_recording(path)
    assert not recording.warnings
    assert [recording.lane_events(i)[-1].kind for i in range(3)] == ["error", "error", "done"]


async def test_the_replay_screen_says_how_many_lines_it_skipped(tmp_path: Path) -> None:
    from tui_harness import at, replay_app

    path = tmp_path / "r.jsonl"
    header = {"format": "tokrace-recording", "version": 1, "prompt": "Why?", "tiers": [{"name": "a"}]}
    path.write_text("\n".join([json.dumps(header), '{"lane": 0, "kind": "request", "t": 0.0}',
                                "42", '{"lane": 0, "kind": "delta", "t": NaN}',
                                '{"lane": 0, "kind": "delta", "t": 0.5, "text": "hi"}',
                                '{"lane": 0, "kind": "done", "t": 0.5}']) + "\n", encoding="utf-8")
    app, clock, _ = replay_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await at(pilot, clock, 1.0)
        told = [n.message for n in app._notifications]
    assert sum("skipped 2 lines that are not recorded events" in m for m in told) == 1
