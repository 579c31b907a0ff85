"""The event log: what goes in comes out equal, whether its blocks were written to the spool or had to stay in
memory (no temporary folder, a full disk), and its spool files are closed once no log holds them."""

from __future__ import annotations

import copy
import errno
import gc
import os
import pickle
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pytest

from tokrace.providers.model import eventlog
from tokrace.providers.model.eventlog import BLOCK, BLOCK_CHARS, CACHE_BLOCKS, EventLog
from tokrace.providers.model.events import (
    Delta,
    DeltaRun,
    Done,
    Error,
    Event,
    Extra,
    Headers,
    Request,
    Segment,
    ToolCall,
    Usage,
)
from tokrace.providers.model.tiers import TierSpec

TEXTS = ("plain", " é", "日本語", "🙂 emoji", "\ud800 lone", "", "tab\tand\nnewline", "\x00nul")
"""Multi-byte characters (two, three and four bytes), a lone surrogate a JSON stream can carry, empty text."""


def mixed(count: int) -> list[Event]:
    """``count`` events: deltas of every channel and kind of count, with other events among them."""
    out: list[Event] = [Request(t=0.0, model="m", endpoint="/v1"), Headers(t=0.01, request_id="r", status=200)]
    for i in range(count):
        if i % 997 == 5:
            out.append(Usage(t=0.2 + i, input=3, output=i))
        elif i % 1499 == 7:
            out.append(Extra(t=0.2 + i, source="groq", data={"n": i, "nested": [1.5, None, "x"]}))
        elif i % 2003 == 11:
            out.append(Segment(t=0.2 + i, seg="stall", start=0.1 + i, end=0.2 + i, label="s", chain="sub"))
        else:
            tokens = (None, 0, 1, 127, 128, -3, 2**40)[i % 7]
            out.append(Delta(t=0.2 + i * 1e-3 + 1e-9 * (i % 3), text=f"{TEXTS[i % len(TEXTS)]}{i}",
                             channel=("content", "reasoning", "tool_args")[i % 3], tokens=tokens))
    out += [ToolCall(t=9e3, id="c", name="search", arguments='{"q": "é"}'), Usage(t=9e3, output=count)]
    return out


def texts(events: Iterable[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, Delta)]


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_log_reads_back_every_event_across_blocks_in_every_way() -> None:
    events = mixed(3 * BLOCK + 123)
    log = EventLog(events)
    assert len(log) == len(events)
    assert list(log) == events and log == events and events == log
    assert list(reversed(log)) == events[::-1]
    for i in (0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, len(events) - 1, -1, -BLOCK, -len(events)):
        assert log[i] == events[i], i
    for cut in (slice(BLOCK - 3, BLOCK + 3), slice(None, 10), slice(-5, None), slice(BLOCK * 2 + 7, None, 3),
                slice(None, None, -BLOCK), slice(5, 5), slice(len(events) + 9, None)):
        assert log[cut] == events[cut], cut
    with pytest.raises(IndexError):
        log[len(events)]
    with pytest.raises(IndexError):
        log[-len(events) - 1]
    assert log.index(events[BLOCK + 40]) == events.index(events[BLOCK + 40])
    assert events[-1] in log
    assert log._stored and all(stored.spool is not None for stored in log._stored)  # they went to the spool


def test_a_delta_reads_back_as_a_delta_with_its_text_and_count_exactly() -> None:
    events = mixed(BLOCK + 50)
    log = EventLog(events)
    for got, want in zip(log, events, strict=True):
        assert type(got) is type(want) and got == want
        if isinstance(want, Delta) and isinstance(got, Delta):
            assert got.text == want.text and got.tokens == want.tokens and got.t == want.t


def test_a_lanes_end_writes_its_block_and_the_events_after_it_go_on() -> None:
    """A loop's lane ends a turn with done and goes on; a failed lane ends with an error."""
    turn: list[Event] = [Request(t=0.0), Delta(t=0.1, text="a"), Done(t=0.2)]
    log = EventLog()
    for k in range(3):
        for event in turn:
            log.append(event)
        assert len(log._stored) == k + 1 and not log._texts
    log.append(Request(t=1.0))
    log.append(Error(t=1.1, error="http", message="boom"))
    assert len(log._stored) == 4
    assert list(log) == [*turn, *turn, *turn, Request(t=1.0), Error(t=1.1, error="http", message="boom")]
    assert log[-1] == Error(t=1.1, error="http", message="boom") and log[2] == Done(t=0.2)


def test_a_delta_out_of_the_ordinary_is_kept_as_it_came() -> None:
    """A count beyond a byte, a negative one, a channel no provider sends: kept whole, read back equal."""
    events: list[Event] = [Delta(t=1.0, text="x", tokens=2**40), Delta(t=1.1, text="y", tokens=-3),
                           Delta(t=1.2, text="z", channel="odd"),  # type: ignore[arg-type]
                           *(Delta(t=2.0 + i, text="w") for i in range(BLOCK))]
    log = EventLog(events)
    assert list(log) == events and log[2] == events[2] and log._stored[0].spool is not None


def test_huge_texts_close_a_block_early_and_a_giant_one_is_kept_whole() -> None:
    events: list[Event] = [Delta(t=float(i), text="x" * (BLOCK_CHARS // 3 + 1)) for i in range(7)]
    events.append(Delta(t=9.0, text="é" * (BLOCK_CHARS + 1), tokens=2))
    log = EventLog(events)
    assert len(log._stored) == 3 and list(log) == events  # 3 deltas, 3 deltas, then the rest with the giant one
    assert not log._texts


def test_giant_deltas_each_close_their_block_so_none_waits_in_memory() -> None:
    """A server sending 60 events of 4 MB kept all 240 MB in the open block until the lane ended."""
    events: list[Event] = [Delta(t=float(i), text="y" * (BLOCK_CHARS + 1)) for i in range(5)]
    log = EventLog()
    for k, event in enumerate(events, 1):
        log.append(event)
        assert len(log._stored) == k and not log._others
    assert list(log) == events


def test_reading_while_appending_sees_the_log_as_it_was_when_asked() -> None:
    """An iterator part-way through the open block when it is written out reads it as it was."""
    log = EventLog(Delta(t=float(i), text=str(i)) for i in range(BLOCK - 2))
    reader = iter(log)
    first = [next(reader) for _ in range(10)]
    for i in range(BLOCK - 2, BLOCK + 5):
        log.append(Delta(t=float(i), text=str(i)))
    rest = list(reader)
    assert texts(first + rest) == [str(i) for i in range(BLOCK - 2)]
    assert texts(log) == [str(i) for i in range(BLOCK + 5)]


def test_no_temporary_folder_keeps_the_blocks_in_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(eventlog, "_current", None)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    made: list[int] = []
    real = eventlog._Spool.__init__

    def counted(self: eventlog._Spool) -> None:
        made.append(1)
        real(self)

    monkeypatch.setattr(eventlog._Spool, "__init__", counted)
    events = mixed(3 * BLOCK)
    log = EventLog(events)
    assert list(log) == events and log[-1] == events[-1] and log[BLOCK:BLOCK + 2] == events[BLOCK:BLOCK + 2]
    assert len(log._stored) == 3 and all(s.spool is None and s.block is not None for s in log._stored)
    assert len(made) == 1, "a log that could not write tries once, not at every block"
    other = EventLog(events[:BLOCK + 1])  # a new log tries again, once
    assert list(other) == events[:BLOCK + 1] and len(made) == 2


@pytest.mark.parametrize("failure", [errno.ENOSPC, errno.EFBIG, errno.EIO, 0])
def test_a_write_that_fails_keeps_the_block_in_memory(monkeypatch: pytest.MonkeyPatch, failure: int) -> None:
    """A full disk, a file-size limit, an I/O error, or a write that writes nothing: no event is lost."""
    calls: list[int] = []
    real = os.pwrite

    def failing(fd: int, data: bytes, offset: int) -> int:
        calls.append(offset)
        if len(calls) == 1:
            return real(fd, data, offset)  # the first block goes through
        if failure == 0:
            return 0
        raise OSError(failure, os.strerror(failure))

    monkeypatch.setattr(os, "pwrite", failing)
    events = mixed(4 * BLOCK)
    log = EventLog(events)
    assert [s.spool is not None for s in log._stored] == [True, False, False, False]
    assert len(calls) == 2
    assert list(log) == events and log[BLOCK - 1:BLOCK + 1] == events[BLOCK - 1:BLOCK + 1]


def test_without_positional_reads_and_writes_the_spool_seeks(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on Windows, which has no ``os.pread``/``os.pwrite``: one read or write at a time, at its place."""
    monkeypatch.delattr(os, "pwrite")
    monkeypatch.delattr(os, "pread")
    monkeypatch.setattr(eventlog, "_current", None)
    events = mixed(3 * BLOCK)
    log = EventLog(events)
    eventlog._cache.clear()
    assert all(s.spool is not None for s in log._stored)
    assert log[BLOCK + 1] == events[BLOCK + 1] and list(log) == events


def test_an_event_that_cannot_be_pickled_keeps_its_block_in_memory() -> None:
    strange = Extra(t=1.0, source="x", data={"f": lambda: 1})
    events: list[Event] = [strange, *(Delta(t=2.0 + i, text="a") for i in range(BLOCK))]
    log = EventLog(events)
    assert log._stored[0].spool is None and log[0] is strange and list(log)[1:] == events[1:]


def test_a_short_spool_is_an_error_not_wrong_events(monkeypatch: pytest.MonkeyPatch) -> None:
    log = EventLog(Delta(t=float(i), text="a") for i in range(BLOCK + 1))
    eventlog._cache.clear()
    monkeypatch.setattr(os, "pread", lambda fd, size, offset: b"")
    with pytest.raises(OSError, match="shorter than written"):
        log[0]


def test_every_log_shares_one_spool_file_and_it_is_closed_when_the_last_log_goes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eventlog, "_current", None)
    gc.collect()
    before = fd_count()
    logs = [EventLog(Delta(t=float(i), text="abc") for i in range(BLOCK + 10)) for _ in range(30)]
    assert fd_count() <= before + 1
    spools = {id(s.spool) for log in logs for s in log._stored}
    assert len(spools) == 1
    del logs
    eventlog._cache.clear()
    gc.collect()
    assert fd_count() <= before


def test_a_full_spool_makes_way_for_a_fresh_one_and_closes_when_its_logs_are_gone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Race after race on the screen: the file of old races is closed (its space freed) once they are dropped."""
    monkeypatch.setattr(eventlog, "SPOOL_BYTES", 100_000)
    monkeypatch.setattr(eventlog, "_current", None)
    gc.collect()
    before = fd_count()
    kept = EventLog()
    for race in range(20):
        lane = EventLog(Delta(t=float(i), text="some text") for i in range(2 * BLOCK))
        if race == 0:
            kept = lane
        assert fd_count() <= before + 3
    eventlog._cache.clear()
    gc.collect()
    assert fd_count() <= before + 2  # the first race's file (still held) and the current one
    assert texts(kept) == ["some text"] * 2 * BLOCK
    del kept, lane
    gc.collect()
    assert fd_count() <= before


def test_the_cache_of_blocks_read_back_stays_small() -> None:
    logs = [EventLog(Delta(t=float(i), text="x") for i in range(3 * BLOCK)) for _ in range(5)]
    for log in logs:
        assert sum(1 for _ in log) == 3 * BLOCK
        assert log[5].t == 5.0
    assert len(eventlog._cache) <= CACHE_BLOCKS


def test_a_log_pickles_and_copies_as_its_events() -> None:
    events = mixed(BLOCK + 3)
    log = EventLog(events)
    assert pickle.loads(pickle.dumps(log)) == events
    copied = copy.deepcopy(log)
    assert isinstance(copied, EventLog) and copied == events


def test_bench_runs_leave_one_file_open_while_their_results_are_held_and_none_after() -> None:
    """``bench --runs N`` keeps every run's lanes: their events share one temporary file, closed with them."""
    import asyncio

    from tokrace.providers.model.messages import TurnRequest
    from tokrace.providers.runs.session import run_session

    tiers = [TierSpec(name=f"lane{i}", provider="synthetic", model="m", options={"tok_s": 5000, "seed": i})
             for i in range(2)]
    gc.collect()
    before = fd_count()
    result = asyncio.run(run_session(tiers, TurnRequest("Why?", max_tokens=BLOCK + 100), runs=6, fast_forward=True))
    assert result.all_ok and result.metrics[0][5].output_tokens == BLOCK + 100
    assert all(stored.spool is not None for run in result.runs for lane in run for stored in lane.events._stored)
    assert fd_count() <= before + 1
    del result
    gc.collect()
    assert fd_count() <= before


def test_a_list_of_plain_deltas_crossing_block_ends_goes_in_column_by_column(monkeypatch: pytest.MonkeyPatch) -> None:
    """A list of plain deltas longer than the open block's room, or whose texts fill it, is cut where keeping them
    one by one ends a block (its event count, or its characters): the same blocks, with no delta kept one by one."""
    big = BLOCK_CHARS // 3
    deltas: list[Event] = [Delta(t=i * 1e-3, text=f"w{i}", channel=("content", "reasoning")[i % 2],
                                 tokens=(None, 1, 127)[i % 3]) for i in range(3 * BLOCK + 50)]
    deltas[BLOCK + 9:BLOCK + 9] = [Delta(t=5.0, text="x" * big) for _ in range(4)]  # a block ends on characters
    one_by_one, at_once = EventLog(), EventLog()
    for event in deltas:
        one_by_one.append(event)
    kept_alone: list[Event] = []
    monkeypatch.setattr(EventLog, "append", lambda log, event: kept_alone.append(event))
    at_once.extend(deltas[:100])
    at_once.extend(deltas[100:BLOCK + 20])
    at_once.extend(deltas[BLOCK + 20:])
    assert kept_alone == []
    assert at_once._starts == one_by_one._starts and len(at_once._starts) == 4
    assert list(at_once) == list(one_by_one) == deltas


def test_lists_of_deltas_kept_at_once_read_back_as_kept_one_by_one() -> None:
    """A synthetic lane's wake-up hands the log hundreds of plain deltas in one list, kept column by column: the
    log reads back the same events, in the same blocks, as one that kept them one by one, whatever the lists hold
    (other events, deltas out of the ordinary, lists that cross a block's end)."""
    events = mixed(3 * BLOCK)
    events[700:700] = [Delta(t=0.5, text="x" * 10, chunks=3), Delta(t=0.5, text="y", tokens=500)]
    events[900:900] = [Delta(t=0.6, text="z" * (BLOCK_CHARS // 2)), Delta(t=0.6, text="w" * (BLOCK_CHARS // 2))]
    one_by_one, at_once = EventLog(), EventLog()
    for event in events:
        one_by_one.append(event)
    at, size = 0, 1
    while at < len(events):
        at_once.extend(events[at:at + size])
        at, size = at + size, size % 300 + 7
    assert list(at_once) == list(one_by_one) == events
    assert at_once._starts == one_by_one._starts  # the same blocks


def test_runs_of_deltas_go_in_column_by_column_and_read_back_as_kept_one_by_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthetic lane's runs (``DeltaRun``: columns, no ``Delta`` made) go in as columns, cut where keeping them one
    by one ends a block (its event count, or its characters); a run the columns cannot hold (a count above a byte's,
    a text longer than a block's) is kept delta by delta. Either way the same events, in the same blocks."""
    big = BLOCK_CHARS // 3
    runs = [DeltaRun([i * 1e-3 + j * 1e-5 for j in range(n)], [f"w{i}.{j}" for j in range(n)],
                     ("content", "reasoning", "tool_args")[i % 3], [(i + j) % 128 for j in range(n)])
            for i, n in enumerate([2, 300, 4000, 5, 4096, 77] * 3)]
    runs.insert(7, DeltaRun([5.0] * 4, ["x" * big] * 4, "content", [1] * 4))  # a block ends on characters
    columned = len(runs)
    runs.append(DeltaRun([6.0, 6.1], ["a", "b"], "content", [1, 128]))  # a count over a byte
    runs.append(DeltaRun([6.2, 6.3], ["a", "y" * (BLOCK_CHARS + 1)], "content", [1, 1]))  # a text over a block
    one_by_one, at_once = EventLog(), EventLog()
    for run in runs:
        for event in run:
            one_by_one.append(event)
    kept_alone: list[Event] = []
    real_append = EventLog.append

    def noted(log: EventLog, event: Event) -> None:
        kept_alone.append(event)
        real_append(log, event)

    monkeypatch.setattr(EventLog, "append", noted)
    for run in runs:
        at_once.extend(run)
    assert kept_alone == [*runs[columned], *runs[columned + 1]]
    assert at_once._starts == one_by_one._starts and len(at_once._starts) >= 6
    assert list(at_once) == list(one_by_one) == [event for run in runs for event in run]


def test_a_block_holding_a_huge_delta_is_not_kept_in_the_cache() -> None:
    """Four such blocks, each a misbehaving server's 4 MB event, were kept in memory after being written."""
    from tokrace.providers.model import eventlog

    events: list[Event] = [Delta(t=float(i), text="y" * (eventlog.CACHE_BYTES + 1)) for i in range(2)]
    log = EventLog(events)
    assert all(stored.serial not in eventlog._cache for stored in log._stored)
    assert list(log) == events
    assert all(stored.serial not in eventlog._cache for stored in log._stored)


def test_pieces_hand_runs_of_plain_deltas_over_as_columns_and_read_as_the_events() -> None:
    """Spooled blocks, the open block, other events among the deltas (and at a block's edge) and empty texts:
    every ``Plain`` run, made into deltas again, and every other event, in order, are the events kept."""
    from tokrace.providers.model.eventlog import CHANNELS, NO_COUNT, Plain

    events = mixed(2 * BLOCK + 321)
    events[BLOCK - 1] = Headers(t=events[BLOCK - 1].t)  # an event that is not a delta ends a block
    log = EventLog(events)
    again: list[Event] = []
    runs = 0
    for piece in log.pieces():
        if isinstance(piece, Plain):
            runs += 1
            again += [Delta(t, text, CHANNELS[code], None if count == NO_COUNT else count)
                      for t, text, code, count in zip(*piece, strict=True)]
        else:
            again.append(piece)
    assert again == events
    assert runs > 3 and log._stored and len(log._texts) > 0  # from the spool and from the open block
