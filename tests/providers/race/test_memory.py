"""Bounded memory: a race keeps each lane's events in compact columns, the live model keeps only what the screen
draws (a million tokens through both: test_memory_bound.py; the log's blocks on disk: test_eventlog.py)."""

from __future__ import annotations

import random

import pytest

from tokrace.providers.metrics import text_count as metrics
from tokrace.providers.metrics.text_count import COUNT_CHUNK, count_text
from tokrace.providers.metrics.turn import turn_metrics
from tokrace.providers.model import tokens
from tokrace.providers.model.eventlog import BLOCK, EventLog
from tokrace.providers.model.events import Delta, Done, Event, Extra, Headers, Request, Segment, ToolCall, Usage
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.live import LiveRace
from tokrace.providers.race.text import ANSWER_KEEP, TAIL_KEEP


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


WORDS = ("the", "quick", "Brown", "fox's", "don't", "I'll", "they're", "WE'VE", "naïve", "café", "日本語", "Привет",
         "x²", "3.14", "1234567", "foo(bar)", "\n", "\n\n", "  ", "\t", "—", "e\u0301", "ǅemal", "ʰa", "ﬁle", "🙂",
         "a", "Z", "<tag>", "http://x.y/z?q=1")


def prose(words: int, seed: int) -> list[str]:
    """Text of every awkward kind, cut into deltas of 1 to 12 characters."""
    rng = random.Random(seed)
    text = "".join(rng.choice((" ", " ", " ", "", "  ", ", ", ". ", "\n")) + rng.choice(WORDS)
                   for _ in range(words))
    pieces, at = [], 0
    while at < len(text):
        step = rng.randint(1, 12)
        pieces.append(text[at:at + step])
        at += step
    return pieces


@pytest.mark.parametrize("chunk", [1, 37, 500, COUNT_CHUNK])
def test_the_tokenizer_counts_a_long_answer_a_chunk_at_a_time_to_the_same_total(
        monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(metrics, "COUNT_CHUNK", chunk)
    for seed in range(3):
        pieces = prose(20_000, seed)
        assert count_text(pieces) == tokens.count("".join(pieces))
    unbroken = ["日本語の文章", "で", "す。"] * 500  # no space between letters: counted whole
    assert count_text(unbroken) == tokens.count("".join(unbroken))
    assert count_text([]) == tokens.count("")


def test_a_lane_without_usage_counts_the_same_however_it_is_chunked(monkeypatch: pytest.MonkeyPatch) -> None:
    pieces = prose(5_000, 7)
    events: list[Event] = [Request(t=0.0), *(Delta(t=0.1 + i * 1e-3, text=p) for i, p in enumerate(pieces)),
                           Done(t=60.0)]
    whole = tokens.count("".join(pieces))
    assert whole is not None
    monkeypatch.setattr(metrics, "COUNT_CHUNK", 64)
    m = turn_metrics(EventLog(events))
    assert m.tokens_source == "tokenizer" and m.output_tokens == whole[0]


def test_text_without_a_break_is_looked_at_a_logarithmic_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """No space after a letter or digit (CJK, one long word): the text is counted whole, and looking for a place
    to cut it does not happen at every delta (that would be quadratic)."""
    looks: list[int] = []
    real = tokens.word_break

    def counted(text: str) -> int:
        looks.append(len(text))
        return real(text)

    monkeypatch.setattr(metrics, "COUNT_CHUNK", 64)
    monkeypatch.setattr(tokens, "word_break", counted)
    pieces = ["日本語", "の", "、"] * 20_000
    assert count_text(pieces) == tokens.count("".join(pieces))
    assert len(looks) <= 12 and sum(looks) < 4 * len("".join(pieces))
