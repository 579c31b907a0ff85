"""Bounded memory: a race keeps each lane's events in compact columns, the live model keeps only what the screen
draws (a million tokens through both: test_memory_bound.py; the log's blocks on disk: test_eventlog.py)."""

from __future__ import annotations

from providers.base import TierSpec
from providers.eventlog import BLOCK, EventLog
from providers.events import Delta, Done, Event, Extra, Headers, Request, Segment, ToolCall, Usage
from providers.live import ANSWER_KEEP, TAIL_KEEP, LiveRace
from providers.metrics import turn_metrics


def lane_events(deltas: int, tokens: int = 1) -> list[Event]:
    out: list[Event] = [Request(t=0.0, model="m"), Segment(t=0.001, seg="connect", start=0.0, end=0.001),
                        Headers(t=0.01, request_id="r")]
    out += [Delta(t=0.2 + i * 0.001, text=f" w{i % 7}", channel="reasoning" if i < 3 else "content",
                  tokens=None if i % 5 == 0 else tokens) for i in range(deltas)]
    out += [ToolCall(t=9.0, id="c", name="search", arguments="{}"), Extra(t=9.0, source="x", data={"a": 1}),
            Usage(t=9.0, input=3, output=deltas), Done(t=9.0)]
    return out


def test_an_event_log_reads_back_the_events_that_went_in_across_blocks() -> None:
    events = lane_events(2 * BLOCK + 17)
    log = EventLog()
    for event in events:
        log.append(event)
    assert len(log) == len(events)
    assert list(log) == events and log == events and events == log
    assert log[0] == events[0] and log[-1] == events[-1] and log[BLOCK + 3] == events[BLOCK + 3]
    assert log[BLOCK - 2:BLOCK + 2] == events[BLOCK - 2:BLOCK + 2]
    assert log[len(events) - 5:] == events[-5:]
    assert turn_metrics(log) == turn_metrics(events)


def test_a_delta_with_a_count_beyond_a_byte_is_kept_as_it_came() -> None:
    events = [Request(t=0.0), Delta(t=1.0, text="x", tokens=2**40), Delta(t=1.1, text="y", tokens=128),
              Delta(t=1.2, text="z", tokens=-3), Delta(t=1.3, text="w" * 70_000, tokens=127)]
    log = EventLog(events)
    assert list(log) == events and log[1:] == events[1:]


def test_the_live_lane_keeps_only_the_tail_and_the_end_of_a_long_answer() -> None:
    live = LiveRace([TierSpec(name="lane", provider="synthetic")])
    live(0, Request(t=0.0))
    piece = "abcdefghij" * 10
    count = (ANSWER_KEEP + TAIL_KEEP) // len(piece) + 50
    for i in range(count):
        live(0, Delta(t=0.1 + i * 1e-4, text=piece, tokens=1))
    live(0, Done(t=10.0))
    lane = live.lanes[0]
    kept = sum(len(text) for _, text in lane.pieces)
    assert TAIL_KEEP - len(piece) <= kept <= TAIL_KEEP
    assert "".join(text for _, text in lane.tail(250)) == piece[-50:] + piece + piece
    answer = lane.answer_text()
    assert ANSWER_KEEP - len(piece) < count * len(piece) - lane.answer_cut <= ANSWER_KEEP
    assert answer.startswith(f"*… the first {lane.answer_cut:,} characters are in the recording*")
    assert answer.endswith(piece) and lane.tokens == count
