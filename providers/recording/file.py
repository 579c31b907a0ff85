"""Recordings: one JSON Lines file per session, a header line then one event per line (docs/design.md §7).

Written as events happen and flushed per line (one write of each line's bytes, no buffer in between), so a crash
loses at most the line being written; or, buffered (the screen, at tens of thousands of events a second), flushed
as whole lines at every tick of its owner, so a crash loses at most the events since the last tick. Secrets never
reach the file: tiers are written without keys, and any known key value is masked on the way out.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import itertools
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from pathlib import Path
from typing import IO, Any, BinaryIO, Final

from ..model.errors import TokraceError
from ..model.eventlog import EventLog
from ..model.events import (
    MAX_SECONDS,
    Delta,
    DeltaRun,
    Event,
    EventFormatError,
    event_from_dict,
    event_to_dict,
    finite_json,
)
from ..model.masking import MASK as MASK  # the recorder's masking is :mod:`.masking`'s, re-exported for its users
from ..model.masking import MIN_HEADER_SECRET_LEN, MIN_SECRET_LEN, base64_forms, shapes_free, url_secrets
from ..model.masking import redact as redact
from ..model.tiers import TierSpec

FORMAT: Final[str] = "tokrace-recording"
VERSION: Final[int] = 1
"""The major format version this build writes and reads; a newer one is refused."""

class RecordingError(TokraceError):
    """A file is not a recording this version can read."""


def recordings_dir() -> Path:
    """Where recordings go unless told otherwise: the platformdirs user data dir, ``tokrace/recordings``."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("tokrace", appauthor=False)) / "recordings"


def default_path(prompt: str, now: dt.datetime | None = None) -> Path:
    """A new recording's file name: when, plus a slug of the prompt."""
    now = now or dt.datetime.now()
    slug = re.sub(r"[^a-z0-9]+", "-", prompt.lower()).strip("-")[:40] or "race"
    return recordings_dir() / f"{now:%Y%m%d-%H%M%S}-{slug}.jsonl"


def secret_values(tiers: Iterable[TierSpec]) -> list[str]:
    """The secret values tiers could send: each key (from its key variable), every header value, and the secret
    query parameters of its ``base_url``, each also in its base64 forms (Basic auth); longest first, so a longer
    secret is masked before a part of it."""
    from ..model.presets import DEFAULT_KEY_ENV

    values: set[str] = set()
    for tier in tiers:
        env = tier.api_key_env or DEFAULT_KEY_ENV.get(tier.provider)
        if env:
            value = os.environ.get(env, "")
            if len(value) >= MIN_SECRET_LEN:
                values.add(value)
        headers = tier.options.get("headers")
        if isinstance(headers, dict):
            values.update(str(v) for v in headers.values() if len(str(v)) >= MIN_HEADER_SECRET_LEN)
        values.update(url_secrets(tier.base_url))
    values.update([form for value in list(values) for form in base64_forms(value)])
    return sorted(values, key=len, reverse=True)


def event_line(lane: int, run: int, event: Event) -> str:
    """One recorded event as its line (without the newline): the JSON of ``{"lane", "run", **event_to_dict}``.
    Deltas, nearly every line of a recording, are written by a fast path that gives the same text."""
    if type(event) is Delta:
        return _delta_line(lane, run, event, encode_basestring(event.text))
    data = {"lane": lane, "run": run, **event_to_dict(event)}
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a provider's own figure that is not finite: written as null, never NaN or Infinity
        return json.dumps(finite_json(data), ensure_ascii=False, separators=(",", ":"))


def _delta_head(lane: int, run: int) -> str:
    """The start of a delta's line, up to its time (the same for every delta of a lane in a run)."""
    return f'{{"lane":{lane:d},"run":{run:d},"kind":"delta","t":'


def _counted_end(channel: str, tokens: int) -> str:
    """The end of a delta's line of one chunk with the provider's count, after its text: ``channel`` in JSON."""
    return f',"channel":{channel},"tokens":{tokens:d}}}'


def _delta_line(lane: int, run: int, event: Delta, text: str) -> str:
    """A delta's line, its text already in JSON (``text``): what ``json.dumps`` gives, without its cost."""
    channel = _CHANNEL_JSON.get(event.channel) or encode_basestring(event.channel)
    head = _delta_head(lane, run)
    if event.chunks != 1:  # written only when it is not 1: older lines (and readers) stay as they were
        tokens = "" if event.tokens is None else f',"tokens":{event.tokens:d}'
        return f'{head}{event.t!r},"text":{text},"channel":{channel}{tokens},"chunks":{event.chunks:d}}}'
    if event.tokens is None:
        return f'{head}{event.t!r},"text":{text},"channel":{channel}}}'
    return f'{head}{event.t!r},"text":{text}{_counted_end(channel, event.tokens)}'


_CHANNEL_JSON: Final[dict[str, str]] = {c: encode_basestring(c) for c in ("content", "reasoning", "tool_args")}


_PLAIN_CHANNELS: Final[frozenset[str]] = frozenset({"content", "reasoning", "tool_args"})
"""Delta channels whose line, apart from its text, holds nothing :func:`redact` looks for (see
:meth:`Recorder._line`)."""

PLAIN_TEXTS_KEPT: Final[int] = 16_384
PLAIN_TEXT_CHARS: Final[int] = 64
"""How many distinct delta texts, each of at most how many characters, a recorder remembers as holding nothing to
mask (then it starts over): a stream's words repeat (a synthetic lane's few hundred); a longer text (an HTTP read's
joined chunks) hardly ever does, and a kilobyte each, with its JSON, over a long fast race, was 130 MB (now ~5 MB at
most)."""


class Recorder:
    """Writes a session as it happens: a race listener that appends and flushes one line per event, or, when
    ``buffered``, keeps each event's line until :meth:`flush` writes them in one go."""

    def __init__(self, path: Path, prompt: str, tiers: Sequence[TierSpec], scenario: str | None = None,
                 extra: dict[str, Any] | None = None, *, buffered: bool = False) -> None:
        from .. import __version__

        self.path = path
        self.buffered = buffered
        """Keep events for :meth:`flush` (called by the owner every tick) instead of writing each one at once."""
        self._pending: list[str] = []
        """The lines kept since the last :meth:`flush` (buffered), each made as its event came: the events were just
        made then (a line made 50 ms later costs a synthetic lane's every token a third more, its event gone cold)."""
        self._secrets = secret_values(tiers)
        self._plain: dict[str, str] = {}
        """Delta texts found to hold nothing :func:`redact` looks for, each with its JSON: see :meth:`_line`."""
        self.problem: str | None = None
        """Why the recording stopped early (a write failed), or ``None``."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh: BinaryIO | None = path.open("wb", buffering=0)  # unbuffered: each write is one syscall
        except OSError as exc:
            raise RecordingError(f"{path}: cannot write the recording ({exc.strerror or exc})") from None
        self.run = 0
        """The run index stamped on each event (``--runs N`` writes N runs into one file)."""
        header: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "tool_version": __version__,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "prompt": prompt, "scenario": scenario, "tiers": [t.public() for t in tiers],
        }
        header.update(extra or {})
        self._put(redact(json.dumps(header, ensure_ascii=False, separators=(",", ":")), self._secrets))

    def _put(self, lines: str) -> None:
        """Write whole lines (redacted, without the last newline) and hand them to the OS at once: one ``write``
        of their UTF-8 bytes, no buffer in between, so a crash loses at most the line being written. A write that
        fails (a full disk, a file-size limit) closes the file (what it holds stays readable), keeps the reason
        in :attr:`problem` and raises :class:`RecordingError`; later events are dropped."""
        if self._fh is not None:
            self._write((lines + "\n").encode("utf-8"), 0)

    def _write(self, data: bytes, written: int) -> None:
        """Write ``data`` from byte ``written`` on (see :meth:`_put`)."""
        assert self._fh is not None
        try:
            while written < len(data):
                took = self._fh.write(data[written:] if written else data)
                if not took:  # a regular file takes some bytes or fails; never spin on one that does neither
                    raise OSError(errno.EIO, "the file took none of the bytes written to it")
                written += took
        except OSError as exc:
            fh, self._fh = self._fh, None
            self._pending = []
            with contextlib.suppress(OSError):
                fh.close()
            self.problem = f"{self.path}: cannot write the recording ({exc.strerror or exc})"
            raise RecordingError(self.problem) from None

    @property
    def closed(self) -> bool:
        """Whether the file is closed: by :meth:`close`, or by a write that failed."""
        return self._fh is None

    def __call__(self, lane: int, event: Event) -> None:
        """Keep (buffered) or write one event. As a race listener it never raises: a failed write stops the
        recording, :attr:`problem` says why, and the race goes on."""
        if self.buffered:
            if self._fh is not None:
                self._pending.append(self._line(lane, event))
        elif self._fh is not None:
            self._write_line((self._line(lane, event) + "\n").encode("utf-8"))

    def _write_line(self, data: bytes) -> None:
        """Write one whole line (a hot path: one write when the file takes the whole line, as it does)."""
        assert self._fh is not None
        try:
            written = self._fh.write(data)
        except OSError:
            written = 0  # _write tries again and reports it
        if written != len(data):
            with contextlib.suppress(RecordingError):  # kept in self.problem
                self._write(data, written or 0)

    def on_deltas(self, lane: int, deltas: Sequence[Delta]) -> None:
        """Several deltas of a lane at once (see ``Race.emit_many``): kept together when buffered, else each
        written as its own line, as :meth:`__call__` writes it (a crash loses at most the line being written)."""
        if self.buffered:
            if self._fh is not None:
                lines = self._run_lines(lane, self.run, deltas) if type(deltas) is DeltaRun else None
                if lines is not None:
                    self._pending.append(lines)
                else:
                    self._pending += self._delta_lines(lane, self.run, deltas)
        else:
            run, line, write = self.run, self._line, self._write_line
            for delta in deltas:
                if self._fh is None:  # a write failed: the recording stopped
                    return
                write((line(lane, delta, run) + "\n").encode("utf-8"))

    def _line(self, lane: int, event: Event, run: int | None = None) -> str:
        """``redact(event_line(lane, run, event), secrets)`` (``run``: this run by default), for a delta without
        looking for shapes in the whole line when its text was already found to hold none.

        Sound because the rest of a delta's line (its keys, numbers and a plain channel name) holds nothing redact
        looks for, and the text sits between quotes, which no such thing contains: a line shows a trigger only if
        its text does, in the JSON form checked here. Secret values are still looked for in the whole line."""
        run = self.run if run is None else run
        if type(event) is not Delta or event.channel not in _PLAIN_CHANNELS:
            return redact(event_line(lane, run, event), self._secrets)
        text = self._plain.get(event.text)
        if text is None:
            text = encode_basestring(event.text)
            if not shapes_free(text):
                return redact(_delta_line(lane, run, event, text), self._secrets)
            if len(event.text) <= PLAIN_TEXT_CHARS:
                if len(self._plain) >= PLAIN_TEXTS_KEPT:
                    self._plain.clear()
                self._plain[event.text] = text
        line = _delta_line(lane, run, event, text)
        for secret in self._secrets:
            if secret in line:
                return redact(line, self._secrets)
        return line

    def flush(self) -> None:
        """Write the events kept since the last flush as whole lines in one write (see :meth:`_put`)."""
        pending, self._pending = self._pending, []
        if pending and self._fh is not None:
            # Each line masked on its own, as the unbuffered recorder writes it (a delta whose text holds nothing
            # to mask skips the search): the same bytes as masking the joined lines, since no secret or shape can
            # reach across a line's end ("}" then a newline then "{"), and far cheaper than searching 50 ms of
            # lines at once.
            self._put("\n".join(pending))

    def _run_lines(self, lane: int, run: int, deltas: DeltaRun) -> str | None:
        """A synthetic lane's run of deltas as its lines (joined by newlines, without the last one), made column by
        column (no ``Delta`` made, no step of Python per line): the same text as :meth:`_delta_lines`. ``None``
        when a text was not yet found to hold nothing to mask, the channel is not a plain one, or a secret shows."""
        channel = _CHANNEL_JSON.get(deltas.channel)
        texts = list(map(self._plain.get, deltas.texts))
        if channel is None or not texts or None in texts:
            return None
        head = _delta_head(lane, run)
        tokens = deltas.tokens
        then = f"\n{head}"  # each line's end, and the next line's head
        ends: Iterable[str]
        if tokens.count(tokens[0]) == len(tokens):  # one count for all (a synthetic lane's 1 token each)
            ends = itertools.repeat(_counted_end(channel, tokens[0]) + then)
        else:
            ends = [_counted_end(channel, count) + then for count in tokens]
        body = "".join(itertools.chain.from_iterable(
            zip(map(repr, deltas.times), itertools.repeat(',"text":'), texts, ends)))  # type: ignore[arg-type]
        lines = head + body[:-len(then)]
        if self._secrets and any(secret in lines for secret in self._secrets):
            return None
        return lines

    def _delta_lines(self, lane: int, run: int, deltas: Sequence[Delta]) -> list[str]:
        """Each delta's line, as :meth:`_line` makes it. A delta of one chunk and a token count, in a plain channel,
        whose text was already found to hold nothing to mask (nearly every line: a synthetic lane at 12,000 tok/s
        keeps 12,000 a second) is made from the lane's head: one format of its time, text and count, the same text
        at about three quarters of the cost; any other through :meth:`_line`."""
        plain, secrets, line_of = self._plain, self._secrets, self._line
        head = _delta_head(lane, run)
        out: list[str] = []
        append = out.append
        for delta in deltas:
            if (delta.chunks == 1 and type(delta.tokens) is int and (text := plain.get(delta.text)) is not None
                    and (channel := _CHANNEL_JSON.get(delta.channel)) is not None):
                line = f'{head}{delta.t!r},"text":{text}{_counted_end(channel, delta.tokens)}'
                if secrets and any(secret in line for secret in secrets):
                    line = redact(line, secrets)
                append(line)
            else:
                append(line_of(lane, delta, run))
        return out

    def close(self) -> None:
        """Write what is kept (see :meth:`flush`), then close the file; raises :class:`RecordingError` when that
        last write fails."""
        try:
            self.flush()
        finally:
            if self._fh is not None:
                try:
                    self._fh.close()
                except OSError as exc:
                    self.problem = f"{self.path}: cannot write the recording ({exc.strerror or exc})"
                    raise RecordingError(self.problem) from None
                finally:
                    self._fh = None


@dataclass(slots=True)
class Recording:
    """A recording read back: its header and its events per (run, lane)."""

    path: Path
    header: dict[str, Any]
    events: dict[tuple[int, int], EventLog] = field(default_factory=dict)
    """Each lane's events, written to disk a block at a time as they are read (:mod:`.eventlog`): a replay of a long
    recording holds a few bytes per 4,096 events in memory."""
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
        return path.open("rb")
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
    return header


def read_recording(path: Path) -> Recording:
    """Read a recording line by line (never the whole file at once). A truncated last line is dropped with a
    warning; any other line that is not an event of this vocabulary (bad JSON, a wrong shape, a number out of
    range, a lane or run out of place) is skipped, and one warning counts them. A line over 16 MB is refused."""
    rec: Recording | None = None
    skipped = 0
    first_problem = ""
    failed_last: str | None = None
    """Why the latest line failed, while no line has come after it (a last line cut off by a crash)."""
    cut_off = False
    lanes = MAX_LANES
    next_run = 0
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
            except (ValueError, TypeError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, EventFormat
                failed_last = f"line {number}: {_reason(exc)}"
                cut_off = not raw.endswith(b"\n") or isinstance(exc, json.JSONDecodeError | UnicodeDecodeError)
                continue
            next_run = max(next_run, run + 1)
            rec.events.setdefault((run, lane), EventLog()).append(event)
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


@dataclass(frozen=True, slots=True)
class RecordingInfo:
    """One line of ``tokrace recordings``."""

    path: Path
    created: str
    prompt: str
    tiers: list[str]
    duration: float | None
    problem: str | None = None


def list_recordings(directory: Path | None = None) -> list[RecordingInfo]:
    """Every recording in a folder, newest first, from each file's header and last line only; unreadable
    files are listed with their problem."""
    directory = directory or recordings_dir()
    if not directory.is_dir():
        return []
    out = []
    files = [p for p in directory.glob("*.jsonl") if p.is_file()]  # a pipe named .jsonl would never end
    for path in sorted(files, key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            header = read_header(path)
            duration = last_event_time(path)
        except RecordingError as exc:
            out.append(RecordingInfo(path, "", "", [], None, str(exc)))
            continue
        out.append(RecordingInfo(path, str(header.get("created", "")), str(header.get("prompt") or ""),
                                 [str(t.get("name")) for t in header.get("tiers", [])], duration))
    return out
