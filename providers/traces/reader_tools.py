"""What every trace reader shares: streaming a file line by line with bounded memory, timestamps, tolerant field
access, and the chains that turn a list of timed steps into steps that wait for one another."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..model.errors import TokraceError
from ..model.files import open_regular
from ..model.printable import deep_without_controls
from .model import MAIN_CHAIN, Step, StepKind

MAX_LINE: Final[int] = 64 * 1024 * 1024
"""A line longer than this is skipped without being parsed (a real transcript line holding a pasted file is a
few MB at most)."""

MAX_DOCUMENT: Final[int] = 512 * 1024 * 1024
"""A single-document file (one JSON object, not JSON Lines) larger than this is refused: it would be parsed whole."""

HEAD_BYTES: Final[int] = 64 * 1024
"""How much of a file format detection looks at."""


CONTROL_ESCAPES: Final[re.Pattern[bytes]] = re.compile(rb"\\[ubf]")
"""The JSON escapes that can make a control character :func:`~tokrace.providers.model.printable.without_controls`
replaces (``\\u00XX``, ``\\b``, ``\\f``); ``\\n``, ``\\r`` and ``\\t`` it keeps."""


def may_hold_controls(raw: bytes) -> bool:
    """Whether any string :func:`json.loads` makes of ``raw`` (keys too) may hold a control character that
    :func:`~tokrace.providers.model.printable.without_controls` replaces: an escape that can make one, DEL or a
    C1 control written as it is (``\\x7f``; in UTF-8 every C1 control starts with ``\\xc2``), or bytes that make
    :func:`json.loads` read the line as UTF-16 or UTF-32 (a zero byte, a byte-order mark's ``\\xfe`` or ``\\xff``).
    A raw control character below space cannot be inside a string: strict JSON refuses it. When ``False``, every
    string is clean as parsed. The tests (each single byte a ``memchr``) cost about a tenth of walking the parsed
    line (docs/performance.md#traces)."""
    return (CONTROL_ESCAPES.search(raw) is not None or b"\x7f" in raw or b"\xc2" in raw or b"\x00" in raw
            or b"\xfe" in raw or b"\xff" in raw)


def clean_json(raw: bytes) -> Any:
    """``raw`` parsed as JSON with every string in it (keys too) free of control characters, walked only when it
    may hold one (:func:`may_hold_controls`); raises what :func:`json.loads` raises."""
    obj = json.loads(raw)
    return deep_without_controls(obj) if may_hold_controls(raw) else obj


class TraceError(TokraceError):
    """A file cannot be read as a trace at all (the message says why)."""


@dataclass(slots=True)
class Lines:
    """A JSON Lines file read one object at a time; what is not a JSON object is skipped and counted."""

    path: Path
    skipped: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped += 1
        self.reasons[why] = self.reasons.get(why, 0) + 1

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            fh = open_regular(self.path)
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read it ({exc.strerror or exc})") from None
        with fh:
            while True:
                try:
                    raw = fh.readline(MAX_LINE + 1)
                except OSError as exc:
                    raise TraceError(f"{self.path}: cannot read it ({exc.strerror or exc})") from None
                if not raw:
                    return
                if len(raw) > MAX_LINE:
                    self.skip("a line too long to read")
                    while raw and not raw.endswith(b"\n"):  # skip the rest of that line
                        raw = fh.readline(MAX_LINE)
                    continue
                if raw.isspace():  # not raw.strip(): that copies every line to find the few empty ones
                    continue
                try:
                    obj = clean_json(raw)  # names and ids are shown: never a command
                except (json.JSONDecodeError, UnicodeDecodeError):
                    self.skip("a line that is not JSON")
                    continue
                except RecursionError:
                    self.skip("a line nested too deep to read")
                    continue
                if not isinstance(obj, dict):
                    self.skip("a line that is not a JSON object")
                    continue
                yield obj

    def notes(self) -> list[str]:
        return [f"skipped {n} × {why}" for why, n in sorted(self.reasons.items())]


def load_document(path: Path) -> Any:
    """A whole single-document JSON file, refused when too big or not JSON."""
    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT:
            raise TraceError(f"{path}: {size / 1e6:.0f} MB in one JSON document is more than this reader parses "
                             f"({MAX_DOCUMENT // 1_000_000} MB)")
        with open_regular(path) as fh:
            return deep_without_controls(json.load(fh))
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise TraceError(f"{path}: nested too deeply to read (lists or objects inside one another over a "
                         "thousand levels down)") from None


def head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """The first bytes of a file (for format detection)."""
    try:
        with open_regular(path) as fh:
            return fh.read(size)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def json_lines(path: Path) -> bool:
    """Whether a file is JSON Lines: its first non-empty line is a whole JSON object on its own (else it is one
    pretty-printed document). Reads only that line."""
    try:
        with open_regular(path) as fh:
            for raw in iter(lambda: fh.readline(MAX_LINE), b""):
                if raw.strip():
                    try:
                        return isinstance(json.loads(raw), dict)
                    except (json.JSONDecodeError, UnicodeDecodeError):
                        return False
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return True


def head_objects(data: bytes, limit: int = 20) -> list[dict[str, Any]]:
    """The JSON objects on the first complete lines of ``data`` (lines that are not objects are left out)."""
    out: list[dict[str, Any]] = []
    lines = data.split(b"\n")
    if len(data) >= HEAD_BYTES:
        lines = lines[:-1]  # the last one may be cut
    for line in lines[:limit * 2]:
        if not line.strip():
            continue
        try:
            obj = clean_json(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(obj, dict):
            out.append(obj)
        if len(out) >= limit:
            break
    return out


def timestamp(value: Any) -> float | None:
    """Seconds since the epoch from an ISO 8601 string (``Z`` or an offset; naive means UTC) or a number of
    seconds; ``None`` when it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    moment = iso_moment(value)
    return None if moment is None else moment.timestamp()


def iso_moment(value: Any) -> dt.datetime | None:
    """The moment an ISO 8601 string names (``Z`` or an offset; naive means UTC); ``None`` when it is not one."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment


TIME_TOLERANCE_S: Final[float] = 0.001
"""How far a step's end may fall before its start and still be taken as rounding."""


def time_problem(start: float, end: float) -> str | None:
    """Why a step cannot run from ``start`` to ``end`` (not finite, or ending before it starts), else ``None``."""
    if not (math.isfinite(start) and math.isfinite(end)):
        return "its time is not a finite number"
    if end < start - TIME_TOLERANCE_S:
        return f"it ends {start - end:.3f} s before it starts"
    return None


def as_int(value: Any) -> int | None:
    """A token count from an int, a float or a numeric string; ``None`` otherwise (never negative)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float) and value == value:
        return max(int(value), 0)
    if isinstance(value, str):
        try:
            return max(int(float(value)), 0)
        except ValueError:
            return None
    return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        f = float(value)
        return f if f == f and abs(f) != float("inf") else None
    if isinstance(value, str):
        try:
            return as_float(float(value))
        except ValueError:
            return None
    return None


def dig(obj: Any, *keys: str) -> Any:
    """``obj[k1][k2]...`` or ``None`` where any level is missing or not an object."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


@dataclass(slots=True)
class Chains:
    """Collects a trace's steps with unique ids; :meth:`finish` puts them on the trace's clock and links each to
    what it waits for (:func:`link`) unless the reader said so itself."""

    steps: list[Step] = field(default_factory=list)
    _ids: set[str] = field(default_factory=set)
    _given: set[str] = field(default_factory=set)
    dropped: int = 0
    """Steps refused for their times (one ending before it starts, or not a finite time)."""
    first_drop: str = ""

    def add(self, kind: StepKind, start: float, end: float, *, chain: str = MAIN_CHAIN, label: str = "",
            after: tuple[str, ...] | None = None, id: str | None = None, **fields: Any) -> Step | None:
        problem = time_problem(start, end)
        if problem is not None:  # checked like every other number: a step that cannot be is skipped, and said
            self.dropped += 1
            self.first_drop = self.first_drop or f"{kind} {label or id or ''}".strip() + f": {problem}"
            return None
        sid = id if id and id not in self._ids else f"{kind}-{len(self.steps) + 1}"
        step = Step(sid, kind, start, max(end, start), after=after or (), chain=chain, label=label, **fields)
        if after is not None:
            self._given.add(sid)
        self.steps.append(step)
        self._ids.add(sid)
        return step

    def notes(self, notes: list[str]) -> list[str]:
        """``notes`` and, when steps were skipped for their times, how many and why."""
        if not self.dropped:
            return notes
        return [*notes, f"skipped {self.dropped} step(s) whose times cannot be (first, {self.first_drop})"]

    def finish(self) -> list[Step]:
        steps = rebase(self.steps)
        link(steps, self._given)
        return steps


def link(steps: list[Step], keep: set[str] | frozenset[str] = frozenset()) -> None:
    """Each step (in time order) waits for the step before it in its chain; tool calls that overlap run in
    parallel: they wait for what the first of them waited for, and the step after them waits for all of them.
    A sub-agent's first step waits for the main chain's step that ended last before it started (what spawned
    it). Steps whose ids are in ``keep`` keep the dependencies their reader gave."""
    group: dict[str, list[Step]] = {}
    main: list[Step] = []
    for step in steps:
        current = group.get(step.chain, [])
        if not current and step.chain != MAIN_CHAIN and step.id not in keep:
            spawner = max((s for s in main if s.end <= step.start + 1e-9), key=lambda s: s.end, default=None)
            step.after = (spawner.id,) if spawner is not None else ()
            group[step.chain] = [step]
            continue
        parallel = (step.kind == "tool" and current and all(s.kind == "tool" for s in current)
                    and step.start < max(s.end for s in current))
        if step.id not in keep:
            step.after = current[0].after if parallel else tuple(s.id for s in current)
        group[step.chain] = [*current, step] if parallel else [step]
        if step.chain == MAIN_CHAIN:
            main.append(step)


def rebase(steps: list[Step]) -> list[Step]:
    """Steps moved so the earliest starts at 0 (the trace's own clock) and sorted by time."""
    if not steps:
        return steps
    first = min(s.start for s in steps)
    for s in steps:
        s.start -= first
        s.end -= first
    steps.sort(key=lambda s: (s.start, s.end))
    return steps
