"""Joined deltas (``Delta.chunks``): a delta joining k chunks read together is, to every consumer, k deltas at one
time, so a stream and the same stream with its same-time text deltas joined give the same figures."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from serving import joined

from tokrace.providers.metrics.loop import loop_metrics
from tokrace.providers.metrics.turn import turn_metrics
from tokrace.providers.model import tokens
from tokrace.providers.model.eventlog import EventLog
from tokrace.providers.model.events import (
    Delta,
    Done,
    Event,
    EventFormatError,
    Headers,
    Request,
    Segment,
    ToolCall,
    Usage,
    event_from_dict,
    event_to_dict,
    loop_end,
)
from tokrace.providers.model.tiers import Price, TierSpec
from tokrace.providers.race.live import LiveLane
from tokrace.providers.recording import event_line
from tokrace.providers.voice.lens import lane_voice

WORDS = ("The", " bottleneck", " moves", " when", " the", " model", " gets", " fast", ".", " Tools", ",", " tests",
         " and", " people", " wait", "!", " 42", " 7", "\n\n", " ok", "?")


def turn(rng: random.Random, t0: float, n: int, usage: bool, reasoning: int = 0) -> list[Event]:
    """One turn whose deltas come in reads of 1 to 6 chunks at one stamp (as a socket read brings them), with a
    stall in the middle."""
    out: list[Event] = [Request(t=t0, model="m"), Segment(t=t0 + 0.002, seg="connect", start=t0, end=t0 + 0.002),
                        Headers(t=t0 + 0.05)]
    t = t0 + 0.2
    made, stalled = 0, False
    while made < n:
        k = min(rng.choice((1, 1, 2, 3, 6)), n - made)
        channel = "reasoning" if made < reasoning else "content"
        for _ in range(k):
            out.append(Delta(t, rng.choice(WORDS), channel))  # type: ignore[arg-type]
            made += 1
        stall = not stalled and made >= n // 2
        stalled = stalled or stall
        t += 0.6 if stall else rng.choice((0.001, 0.002, 0.004))
    if usage:
        out.append(Usage(t=t, input=12, output=n + 5, cached=4))
    out.append(Done(t=t))
    return out


@pytest.fixture(params=["usage", "tokenizer", "chunks"])
def source(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "chunks":
        monkeypatch.setattr(tokens, "get_encoding", lambda model: ("cl100k_base", None))
    return str(request.param)


def test_a_stream_and_its_joined_reads_give_the_same_bench_json(source: str) -> None:
    rng = random.Random(7)
    events = turn(rng, 0.0, 400, usage=source == "usage", reasoning=60)
    merged = joined(events)
    assert len(merged) < len(events) - 100 and any(isinstance(e, Delta) and e.chunks > 1 for e in merged)
    a = turn_metrics(events, Price(input=1.0, output=2.0), "gpt-4")
    b = turn_metrics(merged, Price(input=1.0, output=2.0), "gpt-4")
    assert a.tokens_source == source
    assert a.token_events == 400 and a.stalls == 1
    assert b.to_json() == a.to_json()
    assert (b.token_events, b.tokens_per_event, b.itl_ms) == (a.token_events, a.tokens_per_event, a.itl_ms)


def test_a_loop_and_its_joined_reads_give_the_same_loop_metrics(source: str) -> None:
    rng = random.Random(11)
    events = [*turn(rng, 0.0, 120, usage=source == "usage"),
              ToolCall(t=2.0, id="c1", name="grep", arguments="{}"),
              Segment(t=2.5, seg="tool", start=2.0, end=2.5, label="grep"),
              *turn(rng, 2.5, 90, usage=source == "usage"), loop_end(5.0, "demo", 2)]
    a, b = loop_metrics(events, model="gpt-4"), loop_metrics(joined(events), model="gpt-4")
    assert a.token_events == 210
    assert b.to_json() == a.to_json()
    assert (b.token_events, b.tokens_per_event, b.itl_ms) == (a.token_events, a.tokens_per_event, a.itl_ms)


def figures(lane: LiveLane, now: float) -> dict[str, Any]:
    """What the screen shows of a lane."""
    return {"tokens": lane.tokens, "source": lane.tokens_source, "ttft": lane.ttft, "decode": lane.decode_rate(),
            "rate": lane.rate(now), "history": lane.history_rates(now, 64), "segments": lane.segments(now),
            "state": lane.state_at(now), "elapsed": lane.elapsed(now), "tail": "".join(t for _, t in lane.tail(500)),
            "answer": lane.answer_text(), "cost": lane.cost_so_far(),
            "turns": [(t.token_events, t.streamed, t.first_tokens, t.gaps) for t in lane.turns]}


@pytest.mark.parametrize("source", ["usage", "chunks", "tokenizer", "tokenizer loaded mid-stream"])
def test_the_live_lane_shows_the_same_figures_for_a_stream_and_its_joined_reads(source: str) -> None:
    usage = source == "usage"
    events = turn(random.Random(3), 0.0, 500, usage=usage, reasoning=40)
    merged = joined(events)
    tier = TierSpec(name="lane", provider="openai", model="m", price=Price(input=1.0, output=2.0))
    split_lane, joined_lane = LiveLane(tier), LiveLane(tier)
    name, encoding = tokens.get_encoding("m")
    if source == "tokenizer":
        split_lane.set_encoding(name, encoding)
        joined_lane.set_encoding(name, encoding)
    pending = list(merged)
    for i, e in enumerate(events):  # sampled as the screen does, once a read's chunks are all in
        split_lane.on_event(e)
        if i + 1 < len(events) and events[i + 1].t == e.t:
            continue
        while pending and pending[0].t <= e.t:
            joined_lane.on_event(pending.pop(0))
        if (source == "tokenizer loaded mid-stream" and i >= 120 and split_lane.encoding is None
                and events[i + 1].t == events[i + 2].t):  # just before a read of several chunks
            split_lane.set_encoding(name, encoding)
            joined_lane.set_encoding(name, encoding)
        assert figures(joined_lane, e.t + 0.01) == figures(split_lane, e.t + 0.01)
    assert not pending
    assert split_lane.tokens_source == source.split()[0]
    for now in (0.3, 1.0, 2.5, 9.0):
        assert figures(joined_lane, now) == figures(split_lane, now)


def test_the_voice_lens_hears_a_stream_and_its_joined_reads_alike() -> None:
    events = turn(random.Random(5), 0.0, 300, usage=True)
    assert lane_voice(joined(events)).to_json() == lane_voice(events).to_json()


def test_a_joined_delta_is_written_with_its_chunks_and_read_back() -> None:
    d = Delta(1.25, "a b c", "reasoning", None, 3)
    line = event_line(0, 1, d)
    assert json.loads(line) == {"lane": 0, "run": 1, "kind": "delta", "t": 1.25, "text": "a b c",
                                "channel": "reasoning", "chunks": 3}
    assert event_from_dict(json.loads(line)) == d
    assert event_to_dict(d) == {"kind": "delta", "t": 1.25, "text": "a b c", "channel": "reasoning", "chunks": 3}
    counted = Delta(2.0, "xy", tokens=4, chunks=2)
    assert event_from_dict(json.loads(event_line(0, 0, counted))) == counted


def test_a_single_chunk_delta_is_written_as_before() -> None:
    line = event_line(0, 0, Delta(0.5, "hi"))
    assert line == '{"lane":0,"run":0,"kind":"delta","t":0.5,"text":"hi","channel":"content"}'
    assert "chunks" not in event_to_dict(Delta(0.5, "hi", tokens=1))
    assert event_from_dict({"kind": "delta", "t": 0.5, "text": "hi"}).chunks == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "3", None, 3, 10**13])
def test_a_recorded_chunks_that_is_not_a_count_from_one_to_its_characters_is_refused(bad: object) -> None:
    """Each chunk joined holds some text: more chunks than characters is a made-up line (and would make the metrics
    hold a gap per chunk)."""
    with pytest.raises(EventFormatError, match="chunks is"):
        event_from_dict({"kind": "delta", "t": 0.5, "text": "hi", "chunks": bad})
    assert event_from_dict({"kind": "delta", "t": 0.5, "text": "hi", "chunks": 2}).chunks == 2  # type: ignore[union-attr]
    assert event_from_dict({"kind": "delta", "t": 0.5, "text": "", "chunks": 1}).chunks == 1  # type: ignore[union-attr]


def test_the_event_log_keeps_joined_deltas_as_they_came() -> None:
    events: list[Event] = [Request(t=0.0), Delta(0.1, "a"), Delta(0.2, "bcd", chunks=3),
                           Delta(0.2, "e", "reasoning", 200, 2), Delta(0.3, "f"), Done(t=0.4)]
    log = EventLog(events)
    assert list(log) == events and log[2] == events[2] and log[1:4] == events[1:4]
    log.seal()
    assert list(log) == events and log[3] == events[3]
