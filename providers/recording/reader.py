"""Reads a recording back (docs/design.md §7): line by line, never whole, forgiving of lines it cannot read and
exact about the header."""

from __future__ import annotations

import json
import math
import os
import re
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from ..model.eventlog import EventLog
from ..model.events import MAX_SECONDS, TIME_TOLERANCE_S, Delta, Event, EventFormatError, event_from_dict
from ..model.files import open_regular
from ..model.printable import deep_without_controls
from .format import FORMAT, VERSION, RecordingError


@dataclass(slots=True, weakref_slot=True)
class Recording:
    """A recording read back: its header and its events per (run, lane)."""

    path: Path
    header: dict[str, Any]
    events: dict[tuple[int, int], EventLog] = field(default_factory=dict)
    """Each lane's events, written to disk a block at a time as they are read (an :class:`EventLog`): a replay of a
    long recording holds a few bytes per 4,096 events in memory."""
    warnings: list[str] = field(default_factory=list)

    @property
    def prompt(self) -> str:
        return str(self.header.get("prompt") or "")

    @property
    def tiers(self) -> list[dict[str, Any]]:
        tiers = self.header.get("tiers")
        return tiers if isinstance(tiers, list) else []

    @property
    def runs(self) -> int:
        return 1 + max((run for run, _ in self.events), default=0)

    def lane_events(self, lane: int, run: int = 0) -> Sequence[Event]:
        return self.events.get((run, lane), EventLog())

    def lane_index(self, lane: int | str) -> int:
        """A lane by index or by its tier's name."""
        if isinstance(lane, int):
            if 0 <= lane < max(len(self.tiers), 1 + max((ln for _, ln in self.events), default=-1)):
                return lane
            raise RecordingError(f"{self.path}: no lane {lane} (it has {len(self.tiers)})")
        for i, tier in enumerate(self.tiers):
            if tier.get("name") == lane:
                return i
        names = ", ".join(str(t.get("name")) for t in self.tiers)
        raise RecordingError(f"{self.path}: no lane named {lane!r} (lanes: {names})")

    @property
    def duration(self) -> float:
        return max((e.t for evs in self.events.values() for e in evs), default=0.0)


MAX_LINE_BYTES: Final[int] = 16 * 1024 * 1024
"""The longest line a recording may hold (16 MB): a longer one is refused rather than read into memory."""

MAX_LANES: Final[int] = 64
"""The most lanes a recording without tiers in its header may hold (events of other lanes are skipped)."""

TAIL_BYTES: Final[int] = 1024 * 1024
"""How much of a file's end ``tokrace recordings`` reads to find the last event (its duration)."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a recording may hold")


_DECODER: Final[json.JSONDecoder] = json.JSONDecoder(parse_float=_finite, parse_constant=_no_constant)


def _json(text: str) -> Any:
    """JSON as a recording may hold it: no ``NaN``, no ``Infinity``, no number too large for a float."""
    return _DECODER.decode(text)


def _lines(path: Path, fh: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of each line, streamed; a line over :data:`MAX_LINE_BYTES` is refused."""
    number = 0
    while line := fh.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(line) > MAX_LINE_BYTES:
            raise RecordingError(f"{path}: line {number} is longer than {MAX_LINE_BYTES // (1024 * 1024)} MB, more "
                                 "than one recorded event ever takes; this file is not a recording tokrace can read")
        yield number, line


def _open(path: Path) -> IO[bytes]:
    try:
        return open_regular(path)
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file") from None
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def read_header(path: Path) -> dict[str, Any]:
    """The header of a recording, checked: a file that is not a recording or is too new is refused."""
    with _open(path) as fh:
        for _, line in _lines(path, fh):
            return _check_header(path, line)
    return _check_header(path, b"")


def _check_header(path: Path, first: bytes) -> dict[str, Any]:
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError:
        raise RecordingError(f"{path}: cannot read it (it is not UTF-8 text)") from None
    try:
        header = _json(text)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise RecordingError(f"{path}: not a tokrace recording (its first line is not a tokrace header)")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
        raise RecordingError(f"{path}: recording format version {version!r:.20} is newer than this tokrace reads "
                             f"({VERSION}); upgrade tokrace to replay it")
    tiers = header.get("tiers", [])
    if not isinstance(tiers, list) or not all(isinstance(t, dict) and isinstance(t.get("name", ""), str)
                                              for t in tiers):
        raise RecordingError(f"{path}: its header's tiers are not a list of tier objects; the file is damaged")
    if not isinstance(header.get("prompt") or "", str) or not isinstance(header.get("scenario") or "", str):
        raise RecordingError(f"{path}: its header's prompt or scenario is not text; the file is damaged")
    return deep_without_controls(header)  # type: ignore[return-value]  # its prompt and names are shown


_READ: weakref.WeakValueDictionary[tuple[str, int, int, int], Recording] = weakref.WeakValueDictionary()
"""Recordings read and still held by someone, by path and the file's identity: a replay's tiers and each of its
lanes read the same file once between them."""


def read_recording(path: Path) -> Recording:
    """Read a recording line by line (never the whole file at once). A truncated last line is dropped with a
    warning; any other line that is not an event of this vocabulary (bad JSON, a wrong shape, a number out of
    range, a lane or run out of place) is skipped, and one warning counts them. A line over 16 MB is refused.

    A file read before and unchanged since (its size, time and inode), whose recording is still held, is not read
    again: the same recording is returned."""
    try:
        stat = os.stat(path)
        key: tuple[str, int, int, int] | None = (str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    except (OSError, ValueError):
        key = None  # reading it says what is wrong
    if key is not None and (known := _READ.get(key)) is not None:
        return known
    rec = _read(path)
    if key is not None:
        _READ[key] = rec
    return rec


def _read(path: Path) -> Recording:
    rec: Recording | None = None
    skipped = 0
    first_problem = ""
    failed_last: str | None = None
    """Why the latest line failed, while no line has come after it (a last line cut off by a crash)."""
    cut_off = False
    lanes = MAX_LANES
    next_run = 0
    last_t: dict[tuple[int, int], float] = {}
    """The latest time of text in each lane's run so far: text is recorded in the order it came (other events,
    such as a segment or a note on the reads, may be written after their time)."""
    with _open(path) as fh:
        for number, raw in _lines(path, fh):
            if rec is None:
                rec = Recording(path, _check_header(path, raw))
                lanes = len(rec.tiers) or MAX_LANES
                continue
            if not raw.strip():
                continue
            if failed_last is not None:
                skipped += 1
                first_problem = first_problem or failed_last
                failed_last = None
            try:
                obj = _json(raw.decode("utf-8"))
                if not isinstance(obj, dict):
                    raise EventFormatError(f"{obj!r:.40} is not an event object")
                lane, run = obj.pop("lane", None), obj.pop("run", 0)
                for name, value, limit in (("lane", lane, lanes), ("run", run, next_run + 1)):
                    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < limit:
                        raise EventFormatError(f"its {name} is {value!r:.20} (expected 0 to {limit - 1})")
                event = event_from_dict(obj)
                last = last_t.get((run, lane), 0.0)
                if type(event) is Delta and event.t < last - TIME_TOLERANCE_S:
                    raise EventFormatError(f"its time {event.t} is before the {last} of the text before it")
            except (ValueError, TypeError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, EventFormat
                failed_last = f"line {number}: {_reason(exc)}"
                cut_off = not raw.endswith(b"\n") or isinstance(exc, json.JSONDecodeError | UnicodeDecodeError)
                continue
            next_run = max(next_run, run + 1)
            if type(event) is Delta:
                last_t[(run, lane)] = max(last_t.get((run, lane), 0.0), event.t)
            log = rec.events.get((run, lane))
            if log is None:  # (not setdefault: it would make a log, and its first block, for every line)
                log = rec.events[(run, lane)] = EventLog()
            log.append(event)
    if rec is None:
        _check_header(path, b"")
    assert rec is not None
    if failed_last is not None and not cut_off:
        skipped += 1
        first_problem = first_problem or failed_last
        failed_last = None
    if skipped:
        rec.warnings.append(f"{path}: skipped {skipped} line{'s' if skipped != 1 else ''} that "
                            f"{'are not recorded events' if skipped != 1 else 'is not a recorded event'} "
                            f"(first, {first_problem}); "
                            "replaying the rest")
    if failed_last is not None:
        rec.warnings.append(f"{path}: the last line is incomplete (the session was cut off); "
                            "replaying what came before it")
    return rec


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg})"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)[:160]


def last_event_time(path: Path) -> float | None:
    """The time of a recording's last readable event, from the end of the file only (``recordings``)."""
    with _open(path) as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - TAIL_BYTES))
        tail = fh.read(TAIL_BYTES)
    for raw in reversed(tail.split(b"\n")[1 if size > TAIL_BYTES else 0:]):
        if not raw.strip():
            continue
        try:
            obj = _json(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            continue
        t = obj.get("t") if isinstance(obj, dict) and "format" not in obj else None
        if isinstance(t, int | float) and not isinstance(t, bool) and 0 <= t <= MAX_SECONDS:
            return float(t)
        if isinstance(obj, dict) and obj.get("format") == FORMAT:
            return 0.0
    return None


_ENDS: Final[tuple[bytes, ...]] = (b'"kind":"done"', b'"kind":"error"', b'"kind":"extra"')
"""The events that may end a lane, as the writer spells them (:func:`.writer.event_line`)."""
_LANE = re.compile(rb'^\{"lane":(\d+),"run":(\d+),')
SCAN_CHUNK: Final[int] = 4 * 1024 * 1024
"""How much of a recording :func:`race_state` reads at a time: its memory stays this, whatever the file's size."""


def _end_lines(data: bytes) -> Iterator[bytes]:
    """The lines of ``data`` (whole lines) that hold an event that may end a lane, found by a byte search (fast
    over the millions of delta lines between them)."""
    for needle in _ENDS:
        at = data.find(needle)
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end
            yield data[start:end]
            at = data.find(needle, end)


def race_state(path: Path, header: dict[str, Any]) -> str:
    """Whether a recorded race ran to its end: ``"stopped"`` when a lane was stopped by the user, ``"partial"``
    when a lane of a run has no end (the program was killed, or the recording stopped part-way), else ``""``.
    A lane ends with its answer's end (``done``), an error, or, in a scenario, its loop's end. The file is read
    in chunks of :data:`SCAN_CHUNK` (``tokrace recordings``)."""
    loop = bool(header.get("scenario"))
    tiers = header.get("tiers")
    lanes = len(tiers) if isinstance(tiers, list) else 0
    ended: set[tuple[int, int]] = set()
    runs = 0
    stopped = False
    carry = b""
    with _open(path) as fh:
        while True:
            chunk = fh.read(SCAN_CHUNK)
            data = carry + chunk
            cut = data.rfind(b"\n") + 1 if chunk else len(data)
            carry = data[cut:]
            for line in _end_lines(data[:cut]):
                match = _LANE.match(line)
                if match is None:
                    continue
                lane, run = int(match[1]), int(match[2])
                runs = max(runs, run + 1)
                if b'"kind":"error"' in line:
                    stopped = stopped or b'"error":"stopped"' in line
                    ended.add((lane, run))
                elif (b'"kind":"done"' in line and not loop) or b'"source":"scenario"' in line:
                    ended.add((lane, run))
            if not chunk:
                break
    if stopped:
        return "stopped"
    return "partial" if any((lane, run) not in ended for lane in range(lanes) for run in range(max(runs, 1))) else ""
