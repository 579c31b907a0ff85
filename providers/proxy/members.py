"""The few top-level members of a big JSON request read a piece at a time, each piece a few short calls of the C
parser, the reader yielding between pieces (docs/design.md §13)."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Generator, Sequence
from typing import Any, Final

WHOLE_BYTES: Final[int] = 256 * 1024
"""A body up to this size is parsed at once (a couple of milliseconds); a bigger one piece by piece: ``json.loads`` of
4 MB held the event loop for 30 to 60 ms, and every other stream's chunks waited behind it."""

PIECE: Final[int] = 8 * 1024
"""The characters one call of the C parser works through at most; a piece ends once it has worked through this many,
so it works through at most twice as many (0.1 to 0.2 ms)."""

SCAN: Final[int] = 8
"""A scan (decoding, hashing, a run of whitespace or of a string's inside) counts a character an eighth of one parsed:
a call scans at most ``RUN`` characters."""

RUN: Final[int] = PIECE * SCAN
"""The most one call scans (64 K: decoding it takes a few microseconds, hashing it about 0.1 ms)."""

FIRST_WINDOW: Final[int] = 256
"""The first try at a value: the C parser on this much text, then eight times as much, up to ``PIECE``; a value
longer than that is read a member, an element or a run of a string at a time."""

MAX_DEPTH: Final[int] = 16
"""Values nested deeper than this, each longer than ``PIECE``, are parsed whole (no agent sends them)."""

_DECODER: Final[json.JSONDecoder] = json.JSONDecoder()
_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = _DECODER.scan_once  # type: ignore[attr-defined]
"""``raw_decode`` without its wrapper (its ``StopIteration`` is "Expecting value")."""
_UNESCAPE: Final[Callable[[str, int], tuple[str, int]]] = json.decoder.scanstring  # type: ignore[attr-defined]
"""The C parser's string reader: a string's inside (from the index past its opening quote) to its closing quote."""
_SPACE: Final[re.Pattern[str]] = re.compile(r"[ \t\n\r]*")
_STRING_RUN: Final[re.Pattern[str]] = re.compile(
    r'(?:[^"\\\x00-\x1f]+'
    r'|\\["\\/bfnrt]'
    r"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    r"|\\u[dD][89abAB][0-9a-fA-F]{2}(?=[^\\]|\\[^u]|\\u[0-9a-fA-F]{4})"
    r"|\\u(?![dD][89abAB])[0-9a-fA-F]{4})*")
"""The whole units of a JSON string's inside (``json``'s strict rules): a high surrogate's escape goes with the low
one after it (the parser joins them), so a run never ends between the two."""
_CUT: Final[int] = 12
"""A run that stops this close to its window's end may have stopped at a unit the window cut: go on from there."""

_NUMBER_LOOKS: Final[int] = 3
"""How far past a number the parser looks to decide it ended ("e+" and a digit would go on with it)."""

Reading = Generator[int, None, "dict[str, Any] | None"]
"""A reader under way: advance it (``next``, each time a piece) until it returns (``StopIteration.value``); each
piece yields how many characters it worked through."""


def members(body: bytes | Sequence[bytes], wanted: frozenset[str]) -> Reading:
    """The ``wanted`` members of the JSON object ``body`` (whole, or the pieces it came in) as ``json.loads`` gives
    them (none of another JSON value), or ``None`` when ``json.loads`` would refuse it."""
    pieces = [body] if isinstance(body, bytes) else body
    if sum(map(len, pieces)) <= WHOLE_BYTES:
        body = b"".join(pieces)
        try:
            whole = json.loads(body)
        except (ValueError, RecursionError):
            return None
        return {k: v for k, v in whole.items() if k in wanted} if isinstance(whole, dict) else {}
    reader = _Reader(wanted)
    try:
        return (yield from reader.read(pieces))
    except (ValueError, RecursionError):  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        return None


class _Reader:
    """One body's reading: its text, and how much of the current piece is spent."""

    def __init__(self, wanted: frozenset[str]) -> None:
        self.wanted = wanted
        self.text = ""
        self.spent = 0
        self.window = FIRST_WINDOW
        """The first try at the next value: twice the last one read (array elements are alike)."""

    def _turn(self) -> int:
        spent, self.spent = self.spent, 0
        return spent

    def read(self, pieces: Sequence[bytes]) -> Reading:
        # as json.loads decodes bytes, in pieces (11 ms for 6 MB of CJK text whole); its first 4 bytes name the coding
        start = b"".join(piece[:4] for piece in pieces[:4])
        decoder = codecs.getincrementaldecoder(json.detect_encoding(start))("surrogatepass")
        parts = []
        for piece in pieces:
            for at in range(0, len(piece), RUN):
                if self.spent >= PIECE:
                    yield self._turn()
                parts.append(decoder.decode(piece[at:at + RUN]))
                self.spent += PIECE
        parts.append(decoder.decode(b"", final=True))
        text = self.text = "".join(parts)
        found: dict[str, Any] = {}
        pos = yield from self._space(self._gap(0))
        if text.startswith("{", pos):
            found, pos = yield from self._object(pos, False, 0, self.wanted)
        else:
            _, pos = yield from self._value(pos, False, 0)
        pos = self._gap(pos)
        if pos < 0:
            pos = yield from self._space(pos)
        if pos != len(text):
            raise ValueError("extra data")
        return found

    def _gap(self, pos: int) -> int:
        """Past the whitespace at ``pos`` (the common case: a short run), or ``~end`` when the run fills a piece."""
        text = self.text
        stop = min(pos + RUN, len(text))
        end = _SPACE.match(text, pos, stop).end()  # type: ignore[union-attr]  # (it matches nothing at least)
        self.spent += (end - pos) // SCAN + 1
        return end if end < stop or stop == len(text) else ~end

    def _space(self, pos: int) -> Generator[int, None, int]:
        """Past a run of whitespace that filled a piece (``~`` where :meth:`_gap` got to), however long."""
        while pos < 0:
            if self.spent >= PIECE:
                yield self._turn()
            pos = self._gap(~pos)
        return pos

    def _try(self, pos: int) -> tuple[Any, int]:
        """The value at ``pos`` and the position past it if it is read on the first try (as the last one was), else
        ``(None, -1)``; not a generator: an array's thousands of elements each skip :meth:`_value`'s making."""
        text, window = self.text, self.window
        if self.spent >= PIECE:
            return None, -1
        part = text[pos:pos + window]
        self.spent += len(part)
        try:
            value, end = _SCAN(part, 0)
        except (ValueError, StopIteration):
            return None, -1
        if end + _NUMBER_LOOKS <= len(part) or pos + window >= len(text):
            self.window = max(FIRST_WINDOW, 2 * end)
            return value, pos + end
        return None, -1

    def _value(self, pos: int, keep: bool, depth: int) -> Generator[int, None, tuple[Any, int]]:
        """The value at ``pos`` (``None`` unless ``keep``) and the position past it, as the C parser reads it."""
        text, window = self.text, self.window
        while True:
            if self.spent >= PIECE:
                yield self._turn()
            window = min(window, PIECE)
            part = text[pos:pos + window]
            self.spent += len(part)
            try:
                value, end = _SCAN(part, 0)
            except (ValueError, StopIteration):
                if pos + window >= len(text):
                    raise ValueError("not a JSON value") from None
            else:  # a number may go on past the window: "1.5e+3" cut after "1.5e+" reads as 1.5
                if end + _NUMBER_LOOKS <= len(part) or pos + window >= len(text):
                    self.window = max(FIRST_WINDOW, 2 * end)
                    return value, pos + end
            if window >= PIECE:
                break
            window *= 8
        head = text[pos]
        if depth < MAX_DEPTH and head == "{":
            return (yield from self._object(pos, keep, depth + 1, frozenset()))
        if depth < MAX_DEPTH and head == "[":
            return (yield from self._array(pos, keep, depth + 1))
        if head == '"':
            return (yield from self._string(pos, keep))
        value, end = _DECODER.raw_decode(text, pos)  # a number longer than a piece, or nesting past MAX_DEPTH
        self.spent += end - pos
        return value, end

    def _object(self, pos: int, keep: bool, depth: int,
                wanted: frozenset[str]) -> Generator[int, None, tuple[Any, int]]:
        """An object a member at a time: all of it if ``keep``, else only the ``wanted`` members."""
        text, out = self.text, dict[str, Any]()
        pos = self._gap(pos + 1)
        if pos < 0:
            pos = yield from self._space(pos)
        if text.startswith("}", pos):
            return out, pos + 1
        while True:
            if not text.startswith('"', pos):
                raise ValueError("expecting a member's name")
            key, pos = yield from self._string(pos, keep or bool(wanted))
            pos = self._gap(pos)
            if pos < 0:
                pos = yield from self._space(pos)
            if not text.startswith(":", pos):
                raise ValueError("expecting ':'")
            pos = self._gap(pos + 1)
            if pos < 0:
                pos = yield from self._space(pos)
            kept = keep or key in wanted
            value, end = self._try(pos)
            value, pos = (value, end) if end >= 0 else (yield from self._value(pos, kept, depth))
            if kept:
                out[key] = value  # (a later duplicate wins, in the first one's place, as in json.loads)
            pos = self._gap(pos)
            if pos < 0:
                pos = yield from self._space(pos)
            if text.startswith(",", pos):
                pos = self._gap(pos + 1)
                if pos < 0:
                    pos = yield from self._space(pos)
            elif text.startswith("}", pos):
                return out, pos + 1
            else:
                raise ValueError("expecting ',' or '}'")

    def _array(self, pos: int, keep: bool, depth: int) -> Generator[int, None, tuple[Any, int]]:
        """An array an element at a time."""
        text, out = self.text, list[Any]()
        pos = self._gap(pos + 1)
        if pos < 0:
            pos = yield from self._space(pos)
        if text.startswith("]", pos):
            return out, pos + 1
        while True:
            value, end = self._try(pos)
            value, pos = (value, end) if end >= 0 else (yield from self._value(pos, keep, depth))
            if keep:
                out.append(value)
            pos = self._gap(pos)
            if pos < 0:
                pos = yield from self._space(pos)
            if text.startswith(",", pos):
                pos = self._gap(pos + 1)
                if pos < 0:
                    pos = yield from self._space(pos)
            elif text.startswith("]", pos):
                return out, pos + 1
            else:
                raise ValueError("expecting ',' or ']'")

    def _string(self, pos: int, keep: bool) -> Generator[int, None, tuple[Any, int]]:
        """A string a run at a time: checked as the parser checks it, decoded by it if ``keep``."""
        if not keep:
            return (yield from self._skip_string(pos))
        text, parts, at = self.text, [], pos + 1
        while True:
            if self.spent >= PIECE:
                yield self._turn()
            stop = min(at + RUN // 2, len(text))  # (a run is checked, then decoded: a piece's worth)
            end = _STRING_RUN.match(text, at, stop).end()  # type: ignore[union-attr]
            self.spent += (end - at) // SCAN + 1
            if keep:
                run = text[at:end]
                if "\\" in run:
                    run = _UNESCAPE(run + '"', 0)[0]
                    self.spent += (end - at) // SCAN + 1
                parts.append(run)
            if text.startswith('"', end):
                return "".join(parts) if keep else None, end + 1
            if stop == len(text) or end < stop - _CUT:
                raise ValueError("not a JSON string")
            at = end

    def _skip_string(self, pos: int) -> Generator[int, None, tuple[None, int]]:
        """A string checked by the parser's own string reader a run at a time (ten times the pace of the run's
        pattern), each run cut where no escape is: before the run of backslashes near the cut, or inside it between
        two (each ``\\\\``)."""
        text, at = self.text, pos + 1
        while True:
            if self.spent >= PIECE:
                yield self._turn()
            cut = at + RUN // 2
            if cut >= len(text):
                cut = len(text)
            else:
                slash = text.rfind("\\", max(at, cut - _CUT), cut)
                if slash >= 0:  # (an escape is at most 12 characters: a surrogate pair's; it cannot reach the cut)
                    cut = at + len(text[at:slash + 1].rstrip("\\"))
                    if cut == at:  # backslashes from here on: escaped ones, two by two
                        cut = at + (slash - at) // 2 * 2
            part = text[at:cut]
            self.spent += len(part) // SCAN + 1
            _, end = _UNESCAPE(part + '"', 0)  # (raises on what json.loads refuses: a control character, a bad escape)
            if end <= len(part):
                return None, at + end
            if cut == len(text):
                raise ValueError("an unterminated string")
            at = cut
