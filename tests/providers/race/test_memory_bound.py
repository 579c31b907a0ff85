"""Issue 12's regression test: a stream of a million one-token deltas through the live model (what the screen
draws), a race's event log (what every view, export and replay reads) and the metrics retains nothing per event.

Two measures, both independent of the machine's speed: ``tracemalloc`` over a window of the stream (every byte kept
between its two ends, after the live model's bounded state has been replaced once by traced objects, so that only
growth shows), and the count of live Python objects over the whole million and the metrics after it."""

from __future__ import annotations

import gc
import sys
import tracemalloc

from tokrace.providers.metrics.turn import turn_metrics
from tokrace.providers.model.eventlog import BLOCK, EventLog
from tokrace.providers.model.events import Delta, Done, Event, Headers, Request, Usage
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.live import LiveRace
from tokrace.providers.race.text import ANSWER_KEEP

TOKENS = 1_000_000
WARM = 200_000
"""Deltas before anything is measured: the live model's tail, answer and rate window fill up."""
PIECE = " token {:03d} of a long stream"
"""Each delta's text (27 characters)."""
SETTLE = ANSWER_KEEP // len(PIECE.format(0)) + BLOCK
"""Traced deltas before the window opens: more than the live answer (and tail) hold, so that the window's two ends
count the same bounded state, all of it traced."""
WINDOW = 6 * BLOCK
"""The measured window: whole blocks, so the block being filled holds as many events at both ends."""
MAX_WINDOW_GROWTH = 64 * 1024
"""Bytes the window may keep: under 3 bytes per event (a list slot alone is 8; the old log kept 12 plus the text)."""
MAX_NEW_OBJECTS = 10_000
"""Objects the million events and their metrics may leave behind (one per event would be 1,000,000)."""


def test_a_million_tokens_through_the_live_model_the_event_log_and_the_metrics_retain_nothing_per_event() -> None:
    live = LiveRace([TierSpec(name="lane", provider="synthetic")])
    lane = live.lanes[0]
    log = EventLog()

    def emit(event: Event) -> None:
        log.append(event)
        lane.on_event(event)

    emit(Request(t=0.0, model="m"))
    emit(Headers(t=0.01))
    rate = 3000.0  # deltas per second of lane time: the live rate window (1 s) stays a few thousand long
    i = 0

    def stream(until: int) -> None:
        nonlocal i
        append, on_event, piece = log.append, lane.on_event, PIECE.format
        for n in range(i, until):  # a new string per delta, as a parser makes them
            delta = Delta(0.2 + n / rate, piece(n % 997), "content", 1)
            append(delta)
            on_event(delta)
        i = until

    stream(WARM)
    gc.collect()
    objects_before = sys.getallocatedblocks()
    tracemalloc.start()
    try:
        stream(WARM + SETTLE)
        before = tracemalloc.get_traced_memory()[0]
        stream(WARM + SETTLE + WINDOW)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    stream(TOKENS)
    emit(Usage(t=TOKENS / rate + 1.0, input=5, output=TOKENS))
    emit(Done(t=TOKENS / rate + 1.0))

    m = turn_metrics(log)
    assert m.ok and m.output_tokens == TOKENS and m.token_events == TOKENS and m.itl_ms is not None
    assert lane.tokens == TOKENS and lane.finished and len(log) == TOKENS + 4
    grown = after - before
    assert grown < MAX_WINDOW_GROWTH, f"{grown:,} bytes kept over {WINDOW:,} events ({grown / WINDOW:.1f} per event)"
    gc.collect()
    kept = sys.getallocatedblocks() - objects_before
    assert kept < MAX_NEW_OBJECTS, f"{kept:,} objects kept by {TOKENS - WARM:,} events and their metrics"


def test_one_huge_piece_of_text_keeps_only_its_end_for_the_tail_and_the_answer() -> None:
    """A misbehaving server's 10 MB event stayed whole in the lane's text until more came."""
    from tokrace.providers.race.text import ANSWER_KEEP, TAIL_KEEP, LaneText

    text = LaneText()
    text.add("content", "x" * 10 + "y" * (2 * ANSWER_KEEP))
    assert sum(len(piece) for _, piece in text.pieces) == TAIL_KEEP
    assert text.answer_cut == 10 + ANSWER_KEEP
    assert text.tail(100) == [("content", "y" * 100)]
    assert text.answer().endswith("y" * ANSWER_KEEP) and "x" not in text.answer()
