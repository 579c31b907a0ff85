"""Deltas handed over together (a synthetic lane's wake-up, ``Race.emit_many``): the same events, in the same
order, at the same times, for every listener and the recording, as one at a time."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from conftest import Timeline, race_virtually, synthetic
from paths import ROOT, TESTS

from tokrace.providers.adapters.synthetic import BATCH_MAX, Profile, SyntheticProvider, schedule
from tokrace.providers.model.events import Delta, DeltaRun, Event
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.live import LiveLane, LiveRace
from tokrace.providers.race.race import Race
from tokrace.providers.recording import Recorder, read_recording
from tokrace.providers.runs.session import run_session
from tokrace.providers.timing.clock import COARSE_WAKE_S, FAST_FORWARD_GRID_S, LaneClock, RealClock, VirtualClock

CALLS = [{"id": "c1", "name": "read", "arguments": '{"path": "a.py", "lines": [1, 2, 3]}'},
         {"id": "c2", "name": "grep", "arguments": '{"pattern": "def main"}'}]

PROFILES: list[dict[str, Any]] = [
    {"ttft_ms": 20, "tok_s": 300, "jitter": 0.3, "seed": 4},
    {"ttft_ms": 5, "tok_s": 900, "thinking_tokens": 30, "thinking_tok_s": 2000, "tokens_per_event": 3},
    {"ttft_ms": 0, "tok_s": 10_000_000, "seed": 2},
    {"ttft_ms": 10, "tok_s": 500, "fail_after_tokens": 17},
]


async def _flat(provider: SyntheticProvider, request: TurnRequest, clock: LaneClock,
                batched: bool) -> tuple[list[Event], list[int]]:
    """Every event a stream gives (flattened) and the size of each list of deltas among them."""
    events: list[Event] = []
    sizes: list[int] = []
    source = provider.stream_batched(request, clock) if batched else provider.stream(request, clock)
    async for item in source:
        if isinstance(item, DeltaRun):
            assert len(item) > 1 and all(type(d) is Delta for d in item)  # a delta alone comes as itself
            assert {d.channel for d in item} == {item.channel}
            sizes.append(len(item))
            events.extend(item)
        else:
            if type(item) is Delta:
                sizes.append(1)
            events.append(item)
        if clock.virtual:  # handed over at the moment of its last event, exactly
            assert clock.now() == events[-1].t
    return events, sizes


def _virtual(profile: dict[str, Any], batched: bool, request: TurnRequest,
             grid: float = 0.0) -> tuple[list[Event], list[int]]:
    async def go() -> tuple[list[Event], list[int]]:
        clock = VirtualClock(grid=grid)
        provider = SyntheticProvider(synthetic("s", **profile))
        return await clock.drive(_flat(provider, request, LaneClock(clock, 0.0, coarse=True), batched))

    return asyncio.run(go())


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("calls", [[], CALLS])
def test_a_synthetic_lane_batched_gives_the_events_it_streams_one_at_a_time(
        profile: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    request = TurnRequest("Why?", max_tokens=120, scripted_tool_calls=calls)
    one, _ = _virtual(profile, False, request)
    many, sizes = _virtual(profile, True, request)
    assert many == one
    assert max(sizes) <= BATCH_MAX
    # on virtual time a sleeper wakes at its moment exactly: a list holds the deltas of that one moment
    assert all(len({d.t for d in group}) == 1 for group in _groups(many, sizes))


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("calls", [[], CALLS])
def test_on_a_grid_a_lane_hands_over_each_cell_at_its_last_moment_with_the_same_events(
        profile: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    request = TurnRequest("Why?", max_tokens=120, scripted_tool_calls=calls)
    one, _ = _virtual(profile, False, request)
    many, sizes = _virtual(profile, True, request, grid=FAST_FORWARD_GRID_S)  # at each list's last moment: _flat
    assert many == one
    groups = _groups(many, sizes)
    assert all(len({math.ceil(d.t / FAST_FORWARD_GRID_S) for d in group}) == 1 for group in groups)
    if profile["tok_s"] >= 10_000:
        assert len(groups) < len([e for e in many if type(e) is Delta]) / 2


def _groups(events: list[Event], sizes: list[int]) -> list[list[Event]]:
    deltas = [e for e in events if type(e) is Delta]
    out, at = [], 0
    for n in sizes:
        out.append(deltas[at:at + n])
        at += n
    return out


class Late:
    """A clock whose sleepers wake a second late (a held event loop): everything planned before then is due."""

    virtual = False

    def now(self) -> float:
        return 0.0

    async def sleep_until(self, t: float) -> float:
        return max(t, 1.0)


async def test_a_lane_far_behind_catches_up_in_lists_of_at_most_batch_max() -> None:
    tier = synthetic("s", ttft_ms=10, tok_s=100_000)
    events, sizes = await _flat(SyntheticProvider(tier), TurnRequest("Why?", max_tokens=1000),
                                Late(), True)  # type: ignore[arg-type]
    assert sizes == [BATCH_MAX] * (1000 // BATCH_MAX) + [1000 % BATCH_MAX]
    assert [e.t for e in events if type(e) is Delta] == [step.t for step in schedule(
        Profile.from_options(tier.options), 1000)]


async def test_on_the_real_clock_the_deltas_due_at_a_wake_up_come_as_one_list_stamped_as_planned() -> None:
    tier = synthetic("fast", ttft_ms=5, tok_s=20_000, seed=3, jitter=0.2)
    clock = RealClock()
    lane_clock = LaneClock(clock, clock.now(), coarse=True)
    events, sizes = await _flat(SyntheticProvider(tier), TurnRequest("Why?", max_tokens=600), lane_clock, True)
    deltas = [e for e in events if type(e) is Delta]
    planned = list(schedule(Profile.from_options(tier.options), 600))
    start = events[0].t
    assert [d.t for d in deltas] == [start + step.t for step in planned]
    assert [d.text for d in deltas] == [step.text for step in planned]
    assert len(sizes) < len(deltas) / 4  # a wake-up every few milliseconds, each with the deltas due by then


class Plain:
    """A listener without ``on_deltas``: called once per event."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, Event]] = []

    def __call__(self, lane: int, event: Event) -> None:
        self.seen.append((lane, event))


class CountingFile:
    """A file that notes each write (what a crash would find: every write a whole line)."""

    def __init__(self, fh: Any) -> None:
        self.fh = fh
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.writes.append(bytes(data))
        return self.fh.write(data) or 0

    def close(self) -> None:
        self.fh.close()


def runs(pieces: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """A lane's tail as runs of one channel's text (deltas handed over together are kept as one piece of it)."""
    out: list[tuple[str, str]] = []
    for channel, text in pieces:
        if out and out[-1][0] == channel:
            out[-1] = (channel, out[-1][1] + text)
        else:
            out.append((channel, text))
    return out


async def test_every_listener_and_the_recording_get_the_same_events_as_one_at_a_time(tmp_path: Path) -> None:
    tiers = [synthetic("a", ttft_ms=5, tok_s=20_000, seed=1, jitter=0.2),
             synthetic("b", ttft_ms=8, tok_s=9_000, seed=2, thinking_tokens=100)]
    plain = Plain()
    live = LiveRace(tiers)
    buffered = Recorder(tmp_path / "buffered.jsonl", "Why?", tiers, buffered=True)
    direct = Recorder(tmp_path / "direct.jsonl", "Why?", tiers)
    counting = CountingFile(direct._fh)
    direct._fh = counting  # type: ignore[assignment]
    calls: list[int] = []
    many = live.on_deltas

    def noting(lane: int, deltas: Any) -> None:
        calls.append(len(deltas))
        many(lane, deltas)

    live.on_deltas = noting  # type: ignore[method-assign]
    race = Race(tiers, TurnRequest("Why?", max_tokens=500), RealClock(), [plain, live, buffered, direct])
    lanes = await race.run()
    buffered.close()
    direct.close()
    assert max(calls) > 1  # some deltas did come together
    for run in lanes:
        assert [e for lane, e in plain.seen if lane == run.index] == list(run.events)
        one = LiveLane(run.tier)
        for event in run.events:
            one.on_event(event)
        got = live.lanes[run.index]
        assert (got.tokens, got.history, list(got._window), runs(got.pieces), got.version, got.last_t,
                got.first_t, got.ttft, got.state) == (one.tokens, one.history, list(one._window), runs(one.pieces),
                                                      one.version, one.last_t, one.first_t, one.ttft, one.state)
    # The recording, buffered or not, holds every event once, as the per-event path writes it; written directly,
    # each write holds whole lines (a crash loses at most the lines being written): one per event, or the lines
    # of the deltas handed over together.
    events = sum(len(run.events) for run in lanes)
    assert all(w.endswith(b"\n") for w in counting.writes)
    assert sum(w.count(b"\n") for w in counting.writes) == events
    assert len(counting.writes) < events and max(w.count(b"\n") for w in counting.writes) == max(calls)
    for path in (tmp_path / "buffered.jsonl", tmp_path / "direct.jsonl"):
        rec = read_recording(path)
        assert not rec.warnings
        for run in lanes:
            assert list(rec.lane_events(run.index)) == list(run.events)
    again = Recorder(tmp_path / "again.jsonl", "Why?", tiers)
    for lane, event in plain.seen:
        again(lane, event)
    again.close()
    lines = (tmp_path / "again.jsonl").read_text().splitlines()[1:]
    assert (tmp_path / "direct.jsonl").read_text().splitlines()[1:] == lines
    assert sorted((tmp_path / "buffered.jsonl").read_text().splitlines()[1:]) == sorted(lines)


def test_lanes_on_virtual_time_hand_over_their_events_in_time_order_across_lanes() -> None:
    tiers = [synthetic(f"l{i}", ttft_ms=100 + 7 * i, tok_s=700 + 50 * i, jitter=0.3, seed=i) for i in range(4)]
    plain = Plain()
    lanes = race_virtually(tiers, max_tokens=300, listeners=[plain])
    times = [event.t for _, event in plain.seen]
    assert times == sorted(times)
    assert {lane for lane, _ in plain.seen} == {0, 1, 2, 3}
    assert all(run.ok for run in lanes)


async def test_a_coarse_sleeper_due_since_the_last_grid_point_waits_for_the_next(timeline: Timeline) -> None:
    clock = RealClock()
    timeline.now += COARSE_WAKE_S / 3  # a third of a cell past a grid point
    now = clock.now()
    last_point = math.floor(now / COARSE_WAKE_S) * COARSE_WAKE_S
    t = (last_point + now) / 2  # due already, but after the grid point just passed
    woke = await clock.sleep_until_coarse(t)
    assert woke >= math.ceil(t / COARSE_WAKE_S) * COARSE_WAKE_S
    behind = clock.now() - 10 * COARSE_WAKE_S
    before = clock.now()
    waits = len(timeline.sleeps)
    assert await clock.sleep_until_coarse(behind) < before + COARSE_WAKE_S / 2  # long due: at once
    assert all(delay == 0 for delay in timeline.sleeps[waits:])  # no wait on the loop's timer, a yield at most


def test_a_subclass_with_its_own_stream_is_streamed_as_it_says() -> None:
    class Own(SyntheticProvider):
        async def stream(self, request: TurnRequest, clock: Any) -> Any:
            async for event in super().stream(request, clock):
                if type(event) is Delta:
                    event = Delta(event.t, event.text.upper(), event.channel, event.tokens)
                yield event

    tier = synthetic("own", ttft_ms=1, tok_s=1000)

    async def go() -> list[Event]:
        clock = VirtualClock()
        race = Race([tier], TurnRequest("Why?", max_tokens=20), clock, providers=[Own(tier)])
        return list((await clock.drive(race.run()))[0].events)

    deltas = [e for e in asyncio.run(go()) if type(e) is Delta]
    assert len(deltas) == 20 and all(d.text == d.text.upper() for d in deltas)


def test_deltas_handed_over_together_are_masked_as_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_KEY_FOR_TEST", "sk-test-abcdefghijklmnop")
    tier = TierSpec(name="m", provider="synthetic", model="", api_key_env="SECRET_KEY_FOR_TEST")
    plain, live = Plain(), LiveRace([tier])
    race = Race([tier], TurnRequest("Why?", max_tokens=5), VirtualClock(), [plain, live])
    deltas = [Delta(0.1, "key sk-test-abcdefghijklmnop here"), Delta(0.2, " and nothing")]
    race.emit_many(0, deltas)
    texts = [e.text for _, e in plain.seen if type(e) is Delta]
    assert texts == ["key *** here", " and nothing"] or ("abcdefghijklmnop" not in "".join(texts) and len(texts) == 2)
    assert [e.text for e in race.lanes[0].events if type(e) is Delta] == texts
    assert "abcdefghijklmnop" not in "".join(text for _, text in live.lanes[0].pieces)


def _race_on(grid: float, tiers: list[TierSpec], max_tokens: int) -> tuple[list[list[Event]], list[tuple[int, Event]]]:
    plain = Plain()

    async def go() -> list[list[Event]]:
        clock = VirtualClock(grid=grid)
        race = Race(tiers, TurnRequest("Why?", max_tokens=max_tokens), clock, [plain])
        return [list(run.events) for run in await clock.drive(race.run())]

    return asyncio.run(go()), plain.seen


def test_lanes_on_a_grid_give_the_same_events_ordered_across_lanes_cell_by_cell() -> None:
    tiers = [synthetic(f"l{i}", ttft_ms=100 + 7 * i, tok_s=700 + 500 * i, jitter=0.3, seed=i,
                       thinking_tokens=40 * i) for i in range(4)]
    exact, _ = _race_on(0.0, tiers, 400)
    gridded, seen = _race_on(FAST_FORWARD_GRID_S, tiers, 400)
    assert gridded == exact
    cells = [math.ceil(e.t / FAST_FORWARD_GRID_S) for _, e in seen]
    assert cells == sorted(cells)  # no event comes before one of an earlier cell, whatever its lane
    times = [e.t for _, e in seen]
    assert times != sorted(times)  # within a cell, a lane's events come together (fewer hand-overs of time)


def test_fast_forward_gives_the_figures_and_events_of_exact_virtual_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench --fast-forward (on its grid) and the same lanes on exact virtual time: the same events, the same
    figures, for a single turn with tool calls and failures, and for a whole scenario's loop."""
    from tokrace.providers.config.demo import demo_tiers
    from tokrace.providers.loop.scenario_file import load_scenario
    from tokrace.providers.runs.session import report

    tiers = [*demo_tiers(), synthetic("fails", ttft_ms=50, tok_s=3000, fail_after_tokens=150)]

    def both(**kwargs: Any) -> list[Any]:
        out = []
        for grid in (FAST_FORWARD_GRID_S, 0.0):
            monkeypatch.setattr("tokrace.providers.runs.session.FAST_FORWARD_GRID_S", grid)
            result = asyncio.run(run_session(tiers, fast_forward=True, **kwargs))
            for lane in result.metrics:  # the one figure that is not virtual time's: when the run started
                for m in lane:
                    for one in [m, *getattr(m, "turns", [])]:
                        one.wall_start = None
            out.append((report(result), [[list(lane.events) for lane in run] for run in result.runs]))
        return out

    gridded, exact = both(request=TurnRequest("Why?", max_tokens=400, scripted_tool_calls=CALLS))
    assert gridded == exact
    gridded, exact = both(request=TurnRequest(""), scenario=load_scenario("coding-loop"))
    assert gridded == exact


def test_a_crash_while_a_list_of_deltas_is_written_leaves_every_line_before_it_whole(tmp_path: Path) -> None:
    """Fast-forward hands the recorder runs of deltas, each run's lines in one write; the process dies at the 8th
    write: the lines of the 7 writes before it are on disk, whole, and the recording reads back without a
    warning."""
    import subprocess
    import sys

    path = tmp_path / "crash.jsonl"
    script = f"""
import asyncio, os, sys
sys.path.insert(0, {str(TESTS)!r})
from conftest import synthetic
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.timing.clock import FAST_FORWARD_GRID_S, VirtualClock
from tokrace.providers.race.race import Race
from tokrace.providers.recording import Recorder
tiers = [synthetic("a", tok_s=3000), synthetic("b", tok_s=4000)]
recorder = Recorder(__import__("pathlib").Path({str(path)!r}), "Why?", tiers)
fh, writes = recorder._fh, []
class Dying:
    def write(self, data):
        writes.append(data)
        if len(writes) == 8:  # the deltas handed over together so far, at most; the lines written before
            sys.stderr.write(str(max(many)) + " " + str(sum(w.count(chr(10).encode()) for w in writes[:7])))
            sys.stderr.flush()
            os._exit(3)
        return fh.write(data)
recorder._fh = Dying()
many = []
class Noting:
    def __call__(self, lane, event): pass
    def on_deltas(self, lane, deltas): many.append(len(deltas))
async def go():
    clock = VirtualClock(grid=FAST_FORWARD_GRID_S)
    await clock.drive(Race(tiers, TurnRequest("Why?", max_tokens=200), clock, [Noting(), recorder]).run())
asyncio.run(go())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 3, done.stderr
    together, written = (int(n) for n in done.stderr.split())
    assert together > 1 and written > 7  # runs of deltas came, each in one write
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1 + written  # the header and every line written
    rec = read_recording(path)
    assert rec.warnings == [] and sum(len(events) for events in rec.events.values()) == written


def test_a_run_of_deltas_is_the_sequence_of_its_deltas() -> None:
    run = DeltaRun([0.5, 0.75, 1.0], [" a", " b", " c"], "reasoning", [1, 2, 1])
    want = [Delta(0.5, " a", "reasoning", 1), Delta(0.75, " b", "reasoning", 2), Delta(1.0, " c", "reasoning", 1)]
    assert len(run) == 3 and list(run) == want and [run[i] for i in range(-3, 3)] == want + want
    assert list(run[1:]) == want[1:] and type(run[1:]) is DeltaRun and run[1:].channel == "reasoning"
    assert all(type(d) is Delta and d.chunks == 1 for d in run)
    assert run.index(want[1]) == 1 and want[2] in run and list(reversed(run)) == want[::-1]
    with pytest.raises(IndexError):
        run[3]
    with pytest.raises(ValueError, match="one length"):
        DeltaRun([0.5], [" a", " b"], "content", [1])
