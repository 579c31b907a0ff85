"""Recordings: one JSON Lines file per session, a header line then one event per line (DESIGN §7).

Written as events happen and flushed per line, so a crash loses at most the line being written; or, buffered (the
screen, at tens of thousands of events a second), flushed as whole lines at every tick of its owner, so a crash
loses at most the events since the last tick. Secrets never reach the file: tiers are written without keys, and
any known key value is masked on the way out.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from pathlib import Path
from typing import IO, Any, Final

from .base import TierSpec, TokraceError
from .events import Delta, Event, EventFormatError, event_from_dict, event_to_dict

FORMAT: Final[str] = "tokrace-recording"
VERSION: Final[int] = 1
"""The major format version this build writes and reads; a newer one is refused."""

MASK: Final[str] = "[redacted]"

_CREDENTIALS: Final[tuple[re.Pattern[str], ...]] = (
    re.compile(r"(?i)((?:proxy-)?authorization|x-api-key|x-goog-api-key|api[-_]?key)((?:\\?[\"'])?\s*[:=]\s*"
               r"(?:\\?[\"'])?(?:(?:bearer|basic|token)\s+)?)(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)\b(bearer)(\s+)(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}"),
)
"""Credentials recognisable by their shape (an Authorization or API-key header's value, a bearer token), masked
even when no key variable names them."""

_CREDENTIAL_WORDS: Final[tuple[str, ...]] = ("authorization", "api", "bearer")
_I_LOOKALIKES: Final[tuple[str, ...]] = ("\u0130", "\u0131")
"""A credential pattern matches only a text holding one of its words (lower-cased), or a character that
case-insensitive matching takes for their i (İ, ı). Without either, the patterns are not run: they cost ~10 µs
per recorded line, the rest of the line ~2 µs."""


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
    """The key values the tiers could use (from their key variables), to mask wherever they might appear."""
    from .http.presets import DEFAULT_KEY_ENV

    values = []
    for tier in tiers:
        env = tier.api_key_env or DEFAULT_KEY_ENV.get(tier.provider)
        if env:
            value = os.environ.get(env, "")
            if len(value) >= 6:
                values.append(value)
    return values


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret value, and anything shaped like a credential, masked."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    lowered = text.lower()
    if any(word in lowered for word in _CREDENTIAL_WORDS) or any(ch in text for ch in _I_LOOKALIKES):
        for pattern in _CREDENTIALS:
            text = pattern.sub(rf"\g<1>\g<2>{MASK}", text)
    return text


def event_line(lane: int, run: int, event: Event) -> str:
    """One recorded event as its line (without the newline): the JSON of ``{"lane", "run", **event_to_dict}``.
    Deltas, nearly every line of a recording, are written by a fast path that gives the same text."""
    if type(event) is Delta:
        tokens = "" if event.tokens is None else f',"tokens":{event.tokens:d}'
        return (f'{{"lane":{lane:d},"run":{run:d},"kind":"delta","t":{event.t!r},'
                f'"text":{encode_basestring(event.text)},"channel":{encode_basestring(event.channel)}{tokens}}}')
    return json.dumps({"lane": lane, "run": run, **event_to_dict(event)}, ensure_ascii=False,
                      separators=(",", ":"))


class Recorder:
    """Writes a session as it happens: a race listener that appends and flushes one line per event, or, when
    ``buffered``, keeps the events until :meth:`flush` writes them as whole lines in one go."""

    def __init__(self, path: Path, prompt: str, tiers: Sequence[TierSpec], scenario: str | None = None,
                 extra: dict[str, Any] | None = None, *, buffered: bool = False) -> None:
        from . import __version__

        self.path = path
        self.buffered = buffered
        """Keep events for :meth:`flush` (called by the owner every tick) instead of writing each one at once."""
        self._pending: list[tuple[int, int, Event]] = []
        self._secrets = secret_values(tiers)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh: IO[str] | None = path.open("w", encoding="utf-8")
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
        """Write whole lines (redacted, without the last newline) and hand them to the OS. A write that fails
        closes the file (what it holds stays readable) and raises :class:`RecordingError`."""
        if self._fh is None:
            return
        try:
            self._fh.write(lines + "\n")
            self._fh.flush()
        except OSError as exc:
            fh, self._fh = self._fh, None
            with contextlib.suppress(OSError):  # closing retries the failed write; it fails the same way
                fh.close()
            raise RecordingError(f"{self.path}: cannot write the recording ({exc.strerror or exc})") from None

    @property
    def closed(self) -> bool:
        """Whether the file is closed: by :meth:`close`, or by a write that failed."""
        return self._fh is None

    def __call__(self, lane: int, event: Event) -> None:
        if self.buffered:
            if self._fh is not None:
                self._pending.append((lane, self.run, event))
        elif self._fh is not None:
            self._fh.write(redact(event_line(lane, self.run, event), self._secrets) + "\n")
            self._fh.flush()

    def flush(self) -> None:
        """Write the events kept since the last flush as whole lines in one write (see :meth:`_put`)."""
        pending, self._pending = self._pending, []
        if pending and self._fh is not None:
            self._put(redact("\n".join([event_line(lane, run, ev) for lane, run, ev in pending]), self._secrets))

    def close(self) -> None:
        """Write what is kept (see :meth:`flush`), then close the file."""
        try:
            self.flush()
        finally:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


@dataclass(slots=True)
class Recording:
    """A recording read back: its header and its events per (run, lane)."""

    path: Path
    header: dict[str, Any]
    events: dict[tuple[int, int], list[Event]] = field(default_factory=dict)
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

    def lane_events(self, lane: int, run: int = 0) -> list[Event]:
        return self.events.get((run, lane), [])

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


def read_header(path: Path) -> dict[str, Any]:
    """The header of a recording, checked: a file that is not a recording or is too new is refused."""
    try:
        with path.open("r", encoding="utf-8") as fh:
            first = fh.readline()
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{path}: cannot read it ({exc})") from None
    return _check_header(path, first)


def _check_header(path: Path, first: str) -> dict[str, Any]:
    try:
        header = json.loads(first)
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise RecordingError(f"{path}: not a tokrace recording (its first line is not a tokrace header)")
    version = header.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise RecordingError(f"{path}: recording format version {version} is newer than this tokrace reads "
                             f"({VERSION}); upgrade tokrace to replay it")
    return header


def read_recording(path: Path) -> Recording:
    """Read a whole recording. A truncated last line is dropped with a warning; damage elsewhere is refused."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{path}: cannot read it ({exc})") from None
    lines = text.split("\n")
    rec = Recording(path, _check_header(path, lines[0]))
    body = lines[1:]
    last = max((i for i, line in enumerate(body) if line.strip()), default=-1)
    for i, line in enumerate(body):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            lane, run = int(obj.pop("lane")), int(obj.pop("run", 0))
            event = event_from_dict(obj)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, EventFormatError) as exc:
            if i == last:
                rec.warnings.append(f"{path}: the last line is incomplete (the session was cut off); "
                                    "replaying what came before it")
                break
            raise RecordingError(f"{path}: line {i + 2} is not a recorded event ({exc})") from None
        rec.events.setdefault((run, lane), []).append(event)
    return rec


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
    """Every recording in a folder, newest first; unreadable files are listed with their problem."""
    directory = directory or recordings_dir()
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            rec = read_recording(path)
        except RecordingError as exc:
            out.append(RecordingInfo(path, "", "", [], None, str(exc)))
            continue
        out.append(RecordingInfo(path, str(rec.header.get("created", "")), rec.prompt,
                                 [str(t.get("name")) for t in rec.tiers], rec.duration))
    return out
