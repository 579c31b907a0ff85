"""A lane's events, kept so that a race of any length stays small: the block being filled in compact columns (a
time, a channel, a count and the text of every delta), and every full block written to an unlinked temporary file
(the spool), with only where it lies kept in memory. A lane's history then costs a few bytes per 4,096 events.

It reads as a sequence of events (length, index, slice, iteration): a ``Delta`` is made again on the way out, equal
to the one that went in, and so is every other kind of event (a few per turn, kept as they came until their block
is written). A block read back is kept in a small cache shared by every log, so reading in order, or the last few
events, costs one read per block. When the spool cannot be written (no temporary folder, a full disk), a log keeps
its blocks in memory instead, as compact as before, and nothing is lost.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import pickle
import struct
import tempfile
import threading
import weakref
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Final, cast, overload

from .events import Channel, Delta, DeltaRun, Done, Error, Event

BLOCK: Final[int] = 4096
"""Events per block: a full block is written to the spool."""

BLOCK_CHARS: Final[int] = 1 << 20
"""A block is also written once its texts hold this many characters (a stream of huge deltas stays small too)."""

SPOOL_BYTES: Final[int] = 64 << 20
"""A spool takes new blocks up to this size, then a fresh one does: a spool's file is closed (and its space freed)
once no log holds a block in it, so the disk holds about what live logs hold, not every race since the start."""

CACHE_BLOCKS: Final[int] = 4
"""Blocks read back and kept, across every log: enough to read two logs side by side in order."""

_CODE: Final[dict[str, int]] = {name: i for i, name in enumerate(("content", "reasoning", "tool_args"))}
_OTHER: Final[int] = 255
"""The code of an event that is not kept in the columns (kept as an object, pickled with its block)."""
_MAX_COUNT: Final[int] = 127
"""The largest count kept in a column (a byte); a delta with a bigger one is kept as it came, and so is one that
joins several chunks (``Delta.chunks``: one such stands for many events, so it costs little per event)."""
_ENDS: Final[tuple[type[Event], ...]] = (Done, Error)
"""Events after which a log writes its block, however small: a finished lane keeps next to nothing in memory
(``bench --runs N`` keeps every run's lanes)."""

_HEAD: Final[struct.Struct] = struct.Struct("<QQQ")
"""A written block starts with its event count, its text's length in bytes and its pickled events' length."""
_BOUNDS: Final[str] = "I" if array("I").itemsize == 4 else "L"
"""Four-byte offsets: a block's text is at most ``2 * BLOCK_CHARS`` characters."""


class Plain(tuple[Sequence[float], Sequence[str], Sequence[int], Sequence[int]]):
    """A run of a log's deltas as their columns (times, texts, channel codes, counts: ``-1`` for none), each of one
    chunk: what :meth:`EventLog.pieces` hands a reader that would otherwise make each ``Delta`` again only to read
    its fields (``CHANNELS[code]`` is a channel's name)."""

    __slots__ = ()


CHANNELS: Final[tuple[Channel, ...]] = ("content", "reasoning", "tool_args")
"""The channels kept in the columns, by their code."""

NO_COUNT: Final[int] = -1
"""A delta without the provider's own count (``tokens=None``), in the columns."""


class _Block:
    """A full block's events, as read back (or kept in memory when it could not be written)."""

    __slots__ = ("bounds", "codes", "count", "others", "text", "times", "tokens")

    def __init__(self, times: array[float], codes: bytes | array[int], tokens: array[int], bounds: array[int],
                 text: str, others: dict[int, Event]) -> None:
        self.count = len(times)
        self.times = times
        self.codes = codes
        self.tokens = tokens
        self.bounds = bounds
        """Where each event's text starts in :attr:`text` (and where the last one ends), in characters."""
        self.text = text
        self.others = others

    def event(self, j: int) -> Event:
        code = self.codes[j]
        if code == _OTHER:
            return self.others[j]
        tokens = self.tokens[j]
        return Delta(self.times[j], self.text[self.bounds[j]:self.bounds[j + 1]], CHANNELS[code],
                     None if tokens == NO_COUNT else tokens)

    def events(self, start: int, stop: int) -> Iterator[Event]:
        times, codes, tokens, bounds, text, others = (self.times, self.codes, self.tokens, self.bounds, self.text,
                                                      self.others)
        for j in range(start, stop):
            code = codes[j]
            if code == _OTHER:
                yield others[j]
            else:
                count = tokens[j]
                yield Delta(times[j], text[bounds[j]:bounds[j + 1]], CHANNELS[code],
                            None if count == NO_COUNT else count)

    def pieces(self, start: int, stop: int) -> Iterator[Event | Plain]:
        """Events ``start`` to ``stop``: each run of deltas kept in the columns as one :class:`Plain`."""
        yield from _pieces(start, stop, self.others, self._plain)

    def _plain(self, i: int, j: int) -> Plain:
        """Events ``i`` to ``j``, all kept in the columns, as columns."""
        bounds, text = self.bounds, self.text
        return Plain((self.times[i:j], [text[a:b] for a, b in zip(bounds[i:j], bounds[i + 1:j + 1], strict=True)],
                      self.codes[i:j], self.tokens[i:j]))

    def payload(self) -> list[bytes]:
        """The block as written to the spool, in parts (never joined: a huge delta's would be one more copy of it):
        its head, its columns, its text (UTF-8, lone surrogates kept as a JSON stream may carry them) and its other
        events, pickled."""
        text = self.text.encode("utf-8", "surrogatepass")
        others = pickle.dumps(self.others, pickle.HIGHEST_PROTOCOL) if self.others else b""
        return [_HEAD.pack(self.count, len(text), len(others)), self.times.tobytes(), bytes(self.codes),
                self.tokens.tobytes(), self.bounds.tobytes(), text, others]

    @classmethod
    def load(cls, data: bytes) -> _Block:
        """A block from its :meth:`payload`."""
        count, text_len, others_len = _HEAD.unpack_from(data)
        view = memoryview(data)
        at = _HEAD.size
        times = array("d")
        times.frombytes(view[at:at + 8 * count])
        at += 8 * count
        codes = bytes(view[at:at + count])
        at += count
        tokens = array("b")
        tokens.frombytes(view[at:at + count])
        at += count
        bounds = array(_BOUNDS)
        size = bounds.itemsize * (count + 1)
        bounds.frombytes(view[at:at + size])
        at += size
        text = str(view[at:at + text_len], "utf-8", "surrogatepass")
        at += text_len
        others: dict[int, Event] = pickle.loads(view[at:at + others_len]) if others_len else {}
        return cls(times, codes, tokens, bounds, text, others)


class _Spool:
    """One unlinked temporary file that full blocks of any number of logs are appended to. It is closed when the
    last block written to it is dropped (every block holds its spool)."""

    __slots__ = ("__weakref__", "_file", "_lock", "fd", "pid", "size")

    def __init__(self) -> None:
        # open as long as the spool lives: the finalizer closes it
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="tokrace-events-", buffering=0)  # noqa: SIM115
        weakref.finalize(self, self._file.close)
        self.fd = self._file.fileno()
        self.pid = os.getpid()
        """The process that writes it (a forked child starts its own)."""
        self.size = 0
        self._lock = threading.Lock()

    def write(self, payload: Sequence[bytes]) -> int:
        """Append the parts of ``payload`` one after the other (joined when small); where they start. A failed write
        (a full disk) raises ``OSError``; the place it was given is never used again."""
        size = sum(map(len, payload))
        if size <= BLOCK_CHARS:  # one write for a block of small events (nearly all)
            payload = [b"".join(payload)]
        with self._lock:
            offset = self.size
            self.size += size
            if not hasattr(os, "pwrite"):  # no positional writes (Windows): one at a time, at the spot
                self._file.seek(offset)
                at = offset
                for part in payload:
                    _write_all(lambda view, _at: self._file.write(view) or 0, part, at)
                    at += len(part)
                return offset
        at = offset
        for part in payload:
            _write_all(lambda view, where: os.pwrite(self.fd, view, where), part, at)
            at += len(part)
        return offset

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset``, as written."""
        parts: list[bytes] = []
        got = 0
        while got < length:
            if hasattr(os, "pread"):
                part = os.pread(self.fd, length - got, offset + got)
            else:
                with self._lock:
                    self._file.seek(offset + got)
                    part = self._file.read(length - got) or b""
            if not part:
                raise OSError(errno.EIO, "the temporary file holding a lane's events is shorter than written")
            parts.append(part)
            got += len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)


def _write_all(write: Callable[[memoryview, int], int], payload: bytes, offset: int) -> None:
    """Write all of ``payload`` with ``write(view, at)``, which may write less than asked."""
    view = memoryview(payload)
    done = 0
    while done < len(view):
        wrote = write(view[done:], offset + done)
        if not wrote:
            raise OSError(errno.ENOSPC, "no space left for a lane's events")
        done += wrote


_current: weakref.ref[_Spool] | None = None
"""The spool new blocks go to, while some log holds a block in it."""
_spool_lock = threading.Lock()


def _spool() -> _Spool:
    """The spool to write to now: the current one, or a fresh one when there is none, it is full, or it belongs
    to the parent of this (forked) process. Raises ``OSError`` when no temporary file can be made."""
    global _current
    with _spool_lock:
        spool = _current() if _current is not None else None
        if spool is None or spool.size >= SPOOL_BYTES or spool.pid != os.getpid():
            spool = _Spool()
            _current = weakref.ref(spool)
        return spool


_cache: OrderedDict[int, tuple[_Block, int]] = OrderedDict()
"""Blocks read back, each with the bytes it took in the spool, by their serial number, the last used last."""
_cache_lock = threading.Lock()
_serials = itertools.count(1)


class _Stored:
    """Where a written block lies: its spool and place, or the block itself when it could not be written."""

    __slots__ = ("block", "length", "offset", "serial", "spool")

    def __init__(self, spool: _Spool | None, offset: int, length: int, block: _Block | None) -> None:
        self.spool = spool
        self.offset = offset
        self.length = length
        self.block = block
        self.serial = next(_serials)
        """Its key in the cache (never reused, unlike an ``id``)."""

    def load(self) -> _Block:
        if self.block is not None:
            return self.block
        serial = self.serial
        with _cache_lock:
            kept = _cache.get(serial)
            if kept is not None:
                _cache.move_to_end(serial)
                return kept[0]
        assert self.spool is not None
        _make_room(self.length)  # before it is read: the blocks it will push out are not held beside it
        block = _Block.load(self.spool.read(self.offset, self.length))
        _remember(serial, block, self.length)
        return block


CACHE_BYTES: Final[int] = 4 * BLOCK_CHARS
"""The most the blocks in the cache may have taken in the spool, together; a larger block is never kept. Blocks of a
few huge deltas (a misbehaving server's 3 MB events) are read again when needed, rather than four of them kept at
once beside the one being read."""


def _remember(serial: int, block: _Block, size: int) -> None:
    """Keep a block read back (or just written) that took ``size`` bytes in the spool in the cache (unless larger
    than :data:`CACHE_BYTES`), dropping those used longest ago to keep within :data:`CACHE_BLOCKS` and
    :data:`CACHE_BYTES`."""
    if size > CACHE_BYTES:
        return
    with _cache_lock:
        _cache[serial] = (block, size)
        _cache.move_to_end(serial)
        _evict(CACHE_BLOCKS, CACHE_BYTES)


def _make_room(size: int) -> None:
    """Drop cached blocks so that one of ``size`` bytes fits beside the rest (or, larger than the cache, nothing
    stays beside it)."""
    with _cache_lock:
        _evict(CACHE_BLOCKS - 1, max(CACHE_BYTES - size, 0))


def _evict(blocks: int, size: int) -> None:
    """Drop the blocks used longest ago until at most ``blocks`` of at most ``size`` bytes are left (the lock held)."""
    while _cache and (len(_cache) > blocks or sum(kept[1] for kept in _cache.values()) > size):
        _cache.popitem(last=False)


class EventLog(Sequence[Event]):
    """Events appended in order, kept in compact columns and written out a block at a time; reads back as the
    same events."""

    __slots__ = ("_base", "_chars", "_codes", "_others", "_spills", "_starts", "_stored",
                 "_texts", "_times", "_tokens")

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._stored: list[_Stored] = []
        """Every full block, in order."""
        self._starts = array("q")
        """The index of each full block's first event."""
        self._base = 0
        """Events in full blocks: the index of the open block's first event."""
        self._spills = True
        """Whether full blocks go to the spool (until a write fails: then they stay in memory)."""
        self._open()
        for event in events:
            self.append(event)

    def _open(self) -> None:
        """Start a new open block. Its columns are new objects (never cleared): a reader part-way through the last
        one goes on reading it as it was."""
        self._times = array("d")
        self._codes = array("B")
        self._tokens = array("b")
        self._texts: list[str] = []
        self._others: dict[int, Event] = {}
        self._chars = 0

    def append(self, event: Event) -> None:
        """Keep one more event."""
        self._times.append(event.t)
        if (type(event) is Delta and event.chunks == 1 and (event.tokens is None or 0 <= event.tokens <= _MAX_COUNT)
                and len(event.text) <= BLOCK_CHARS and event.channel in _CODE):
            self._codes.append(_CODE[event.channel])
            self._tokens.append(NO_COUNT if event.tokens is None else event.tokens)
            self._texts.append(event.text)
            self._chars += len(event.text)
            if len(self._texts) >= BLOCK or self._chars >= BLOCK_CHARS:
                self.seal()
            return
        self._codes.append(_OTHER)
        self._tokens.append(0)
        self._texts.append("")
        self._others[len(self._texts) - 1] = event
        if type(event) is Delta:  # its text counts toward the block's too: 60 huge deltas were held until the end
            self._chars += len(event.text)
        if len(self._texts) >= BLOCK or isinstance(event, _ENDS) or self._chars >= BLOCK_CHARS:
            self.seal()

    def extend(self, events: Iterable[Event]) -> None:
        """Keep several more events, in order (as :meth:`append` keeps each): a run of plain deltas (a synthetic
        lane's wake-up hands over hundreds at 12,000 tok/s, as a :class:`DeltaRun`) goes in column by column, a
        block's worth at a time, each block ending where :meth:`append` would end it (its event count, or the
        delta whose text fills it)."""
        columns = self._columns(events)
        if columns is None:
            append = self.append
            for event in events:
                append(event)
            return
        times, texts, codes, tokens = columns
        while texts:
            room = BLOCK - len(self._texts)
            part = texts[:room]
            chars = self._chars + sum(map(len, part))
            if chars >= BLOCK_CHARS:
                part = part[:bisect_left(list(itertools.accumulate(map(len, part), initial=self._chars)),
                                         BLOCK_CHARS, 1)]
                chars = self._chars + sum(map(len, part))
            n = len(part)
            self._times.extend(times[:n])
            self._codes.extend(codes[:n])
            self._tokens.extend(tokens[:n])
            self._texts.extend(part)
            self._chars = chars
            if len(self._texts) >= BLOCK or chars >= BLOCK_CHARS:
                self.seal()
            times, texts, codes, tokens = times[n:], texts[n:], codes[n:], tokens[n:]

    @staticmethod
    def _columns(events: Iterable[Event]) -> tuple[list[float], list[str], list[int], list[int]] | None:
        """The columns of ``events`` (times, texts, channel codes, counts) when every one is a delta :meth:`append`
        keeps in the columns and there are several; else ``None``."""
        if type(events) is DeltaRun:
            run = events
            if (run.channel in _CODE and len(run) > 1 and min(run.tokens) >= 0 and max(run.tokens) <= _MAX_COUNT
                    and max(map(len, run.texts)) <= BLOCK_CHARS):
                return run.times, run.texts, [_CODE[run.channel]] * len(run), run.tokens
            return None
        if not (type(events) is list and len(events) > 1):
            return None
        for event in events:
            if not (type(event) is Delta and event.chunks == 1 and event.channel in _CODE
                    and (event.tokens is None or 0 <= event.tokens <= _MAX_COUNT) and len(event.text) <= BLOCK_CHARS):
                return None
        deltas = cast("list[Delta]", events)
        return ([delta.t for delta in deltas], [delta.text for delta in deltas],
                [_CODE[delta.channel] for delta in deltas],
                [NO_COUNT if delta.tokens is None else delta.tokens for delta in deltas])

    def seal(self) -> None:
        """Write the open block out now, however small (at a lane's end, say); later events start a new one."""
        count = len(self._texts)
        if not count:
            return
        bounds = array(_BOUNDS, itertools.accumulate(map(len, self._texts), initial=0))
        block = _Block(self._times, self._codes, self._tokens, bounds, "".join(self._texts), self._others)
        self._stored.append(self._store(block))
        self._starts.append(self._base)
        self._base += count
        self._open()

    def _store(self, block: _Block) -> _Stored:
        """The block written to the spool; or, when it cannot be (no temporary folder, a full disk, an event that
        cannot be pickled), kept in memory, and every later block of this log too: nothing is lost, and a failing
        disk is not tried again at every block."""
        if self._spills:
            try:
                payload = block.payload()
                size = sum(map(len, payload))
                spool = _spool()
                stored = _Stored(spool, spool.write(payload), size, None)
                del payload
                if size <= BLOCK_CHARS:  # its events are the likeliest to be read next (the lane's end); a larger
                    _remember(stored.serial, block, size)  # one (huge deltas) is not kept beside the next ones
                return stored
            except Exception:  # whatever failed (the disk, a pickle), the events stay, in memory
                self._spills = False
        return _Stored(None, 0, 0, block)

    def __len__(self) -> int:
        return self._base + len(self._texts)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return list(self._range(start, stop))
            return [self._event(i) for i in range(start, stop, step)]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("event index out of range")
        return self._event(index)

    def __iter__(self) -> Iterator[Event]:
        return self._range(0, len(self))

    def _range(self, start: int, stop: int) -> Iterator[Event]:
        """Events ``start`` to ``stop`` (as the log was when asked), a block at a time."""
        i = start
        while i < stop:
            if i >= self._base:  # the open block, as it is now (a block written meanwhile is read as it was)
                base, times, codes, tokens, texts, others = (self._base, self._times, self._codes, self._tokens,
                                                             self._texts, self._others)
                end = min(stop, base + len(texts))
                for j in range(i - base, end - base):
                    code = codes[j]
                    if code == _OTHER:
                        yield others[j]
                    else:
                        count = tokens[j]
                        yield Delta(times[j], texts[j], CHANNELS[code], None if count == NO_COUNT else count)
                i = end
            else:
                k = bisect_right(self._starts, i) - 1
                first = self._starts[k]
                block = self._stored[k].load()
                end = min(stop, first + block.count)
                yield from block.events(i - first, end - first)
                del block  # not held while the next one is read (one huge delta each: twice its size)
                i = end

    def pieces(self) -> Iterator[Event | Plain]:
        """Every event, in order, but each run of deltas kept in the columns handed over as one :class:`Plain`
        (a turn's metrics read 200,000 deltas without making one)."""
        i, stop = 0, len(self)
        while i < stop:
            if i >= self._base:
                yield from _pieces(i - self._base, stop - self._base, self._others, self._plain)
                return
            k = bisect_right(self._starts, i) - 1
            first = self._starts[k]
            block = self._stored[k].load()
            end = min(stop, first + block.count)
            yield from block.pieces(i - first, end - first)
            del block  # not held while the next one is read (one huge delta each: twice its size)
            i = end

    def _plain(self, i: int, j: int) -> Plain:
        """The open block's events ``i`` to ``j``, all kept in the columns, as columns."""
        return Plain((self._times[i:j], self._texts[i:j], self._codes[i:j], self._tokens[i:j]))

    def __eq__(self, other: object) -> bool:
        """Equal to any list, tuple or log of the same events."""
        if not isinstance(other, EventLog | list | tuple):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"EventLog({len(self)} events)"

    def __reduce__(self) -> tuple[type[EventLog], tuple[list[Event]]]:
        """Pickled (or copied) as its events: a spool is this process's own."""
        return EventLog, (list(self),)

    def _event(self, i: int) -> Event:
        base = self._base
        if i >= base:
            j = i - base
            code = self._codes[j]
            if code == _OTHER:
                return self._others[j]
            tokens = self._tokens[j]
            return Delta(self._times[j], self._texts[j], CHANNELS[code], None if tokens == NO_COUNT else tokens)
        k = bisect_right(self._starts, i) - 1
        return self._stored[k].load().event(i - self._starts[k])


def _pieces(start: int, stop: int, others: dict[int, Event], plain: Callable[[int, int], Plain],
            ) -> Iterator[Event | Plain]:
    """Positions ``start`` to ``stop`` of a block: its other events as they are, the runs between them as
    ``plain(i, j)``."""
    at = start
    for j in sorted(k for k in others if start <= k < stop) if others else ():
        if j > at:
            yield plain(at, j)
        yield others[j]
        at = j + 1
    if stop > at:
        yield plain(at, stop)


def pieces(events: Iterable[Event]) -> Iterable[Event | Plain]:
    """``events``, a log's runs of plain deltas as :class:`Plain` columns (see :meth:`EventLog.pieces`)."""
    return events.pieces() if isinstance(events, EventLog) else events


def as_sequence(events: Iterable[Event]) -> Sequence[Event]:
    """``events`` as something that can be read more than once (a list only when it was a one-shot iterator)."""
    return events if isinstance(events, Sequence) else list(events)


def _forget_spool() -> None:
    """In a forked child: blocks already written are read from the shared file, new ones go to a file of its own
    (positional reads and writes share no file position with the parent), and no lock is left held by a thread
    of the parent."""
    global _current, _spool_lock, _cache_lock
    _current = None
    _spool_lock = threading.Lock()
    _cache_lock = threading.Lock()


with contextlib.suppress(AttributeError):  # no fork (Windows)
    os.register_at_fork(after_in_child=_forget_spool)
