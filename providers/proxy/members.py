"""The few top-level members of a big JSON request read a piece at a time, each piece a few short calls of the C
parser on a window of the body's text decoded, the reader yielding between pieces (docs/design.md §13)."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Generator, Iterable, Sequence
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

REACH: Final[int] = RUN // 2
"""The most text a call looks at past where it starts: the decoded window keeps at least this much ahead of the
reading, so each of its refills decodes this many bytes and joins at most ``RUN`` characters."""

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
_JOIN: Final[Callable[[Iterable[str]], str]] = "".join
"""How a window is made: what is left of the last one and the text decoded after it."""
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
    try:
        return (yield from _Reader(wanted, pieces).read())
    except (ValueError, RecursionError):  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        return None


class _Reader:
    """One body's reading: a window of its text (``window_text`` from ``base``; never the whole text), decoded as the
    reading reaches it, and how much of the current piece is spent."""

    def __init__(self, wanted: frozenset[str], pieces: Sequence[bytes]) -> None:
        self.wanted = wanted
        self.pieces = pieces
        self.piece = self.at = 0
        """The next bytes to decode: ``pieces[piece][at:]``."""
        start = b"".join(piece[:4] for piece in pieces[:4])  # (as json.loads decodes bytes: the first 4 name it)
        self.decoder = codecs.getincrementaldecoder(json.detect_encoding(start))("surrogatepass")
        self.text = ""
        self.base = self.stop = 0
        """Where ``text`` starts and ends in the body's text."""
        self.final = False
        """Whether ``text`` reaches the end of the body's text."""
        self.spent = 0
        self.window = FIRST_WINDOW
        """The first try at the next value: twice the last one read (array elements are alike)."""

    def _turn(self) -> int:
        spent, self.spent = self.spent, 0
        return spent

    def _has(self, pos: int, reach: int) -> bool:
        return pos + reach <= self.stop or self.final

    def _is(self, char: str, pos: int) -> bool:
        return self.text.startswith(char, pos - self.base)

    def _fill(self, pos: int) -> Generator[int, None, None]:
        """The window from ``pos`` on, until it holds ``REACH`` characters or the text's end: each refill a piece of
        its own (decoding ``REACH`` bytes, joining at most ``RUN`` characters)."""
        while not self._has(pos, REACH):
            if self.spent:
                yield self._turn()
            self._more(pos)
            yield self._turn()

    def _more(self, pos: int) -> None:
        """Drop the window's text before ``pos`` and decode up to ``REACH`` more bytes after it."""
        parts, left = [self.text[pos - self.base:]], REACH
        while left > 0 and self.piece < len(self.pieces):
            piece = self.pieces[self.piece]
            chunk = piece[self.at:self.at + left]
            self.at += len(chunk)
            left -= len(chunk)
            if self.at >= len(piece):
                self.piece, self.at = self.piece + 1, 0
            parts.append(self.decoder.decode(chunk))
        if self.piece >= len(self.pieces):
            parts.append(self.decoder.decode(b"", True))
            self.final = True
        self.text = _JOIN(parts)
        self.base, self.stop = pos, pos + len(self.text)
        self.spent += (REACH - left) // SCAN + len(self.text) // SCAN + 1

    def _rest(self, pos: int) -> Generator[int, None, None]:
        """The window from ``pos`` to the text's end, decoded a piece at a time, then joined: for a value the pieces
        cannot take apart (a number longer than a piece, nesting past ``MAX_DEPTH``: no agent sends them)."""
        parts = [self.text[pos - self.base:]]
        while not self.final:
            if self.spent >= PIECE:
                yield self._turn()
            self.text, self.base = "", self.stop
            self._more(self.stop)
            parts.append(self.text)
        self.text = _JOIN(parts)
        self.base = pos
        self.spent += len(self.text) // SCAN

    def read(self) -> Reading:
        found: dict[str, Any] = {}
        pos = yield from self._space(self._gap(0))
        if self._is("{", pos):
            found, pos = yield from self._object(pos, False, 0, self.wanted)
        else:
            _, pos = yield from self._value(pos, False, 0)
        pos = self._gap(pos)
        if pos < 0:
            pos = yield from self._space(pos)
        if not self.final or pos != self.stop:
            raise ValueError("extra data")
        return found

    def _gap(self, pos: int) -> int:
        """Past the whitespace at ``pos`` (the common case: a short run), or ``~end`` when the run fills what the
        window holds of a piece's reach."""
        base = self.base
        stop = min(pos + REACH, self.stop)
        end = base + _SPACE.match(self.text, pos - base, stop - base).end()  # type: ignore[union-attr]
        self.spent += (end - pos) // SCAN + 1
        return end if end < stop or (self.final and stop == self.stop) else ~end

    def _space(self, pos: int) -> Generator[int, None, int]:
        """Past a run of whitespace that filled a piece (``~`` where :meth:`_gap` got to), however long."""
        while pos < 0:
            yield from self._fill(~pos)
            if self.spent >= PIECE:
                yield self._turn()
            pos = self._gap(~pos)
        return pos

    def _try(self, pos: int) -> tuple[Any, int]:
        """The value at ``pos`` and the position past it if it is read on the first try (as the last one was), else
        ``(None, -1)``; not a generator: an array's thousands of elements each skip :meth:`_value`'s making."""
        window = self.window
        if self.spent >= PIECE or not self._has(pos, window):
            return None, -1
        at = pos - self.base
        part = self.text[at:at + window]
        self.spent += len(part)
        try:
            value, end = _SCAN(part, 0)
        except (ValueError, StopIteration):
            return None, -1
        if end + _NUMBER_LOOKS <= len(part) or (self.final and pos + window >= self.stop):
            self.window = max(FIRST_WINDOW, 2 * end)
            return value, pos + end
        return None, -1

    def _value(self, pos: int, keep: bool, depth: int) -> Generator[int, None, tuple[Any, int]]:
        """The value at ``pos`` (``None`` unless ``keep``) and the position past it, as the C parser reads it."""
        window = self.window
        while True:
            yield from self._fill(pos)
            if self.spent >= PIECE:
                yield self._turn()
            window = min(window, PIECE)
            at = pos - self.base
            part = self.text[at:at + window]
            self.spent += len(part)
            last = self.final and pos + window >= self.stop
            try:
                value, end = _SCAN(part, 0)
            except (ValueError, StopIteration):
                if last:
                    raise ValueError("not a JSON value") from None
            else:  # a number may go on past the window: "1.5e+3" cut after "1.5e+" reads as 1.5
                if end + _NUMBER_LOOKS <= len(part) or last:
                    self.window = max(FIRST_WINDOW, 2 * end)
                    return value, pos + end
            if window >= PIECE:
                break
            window *= 8
        head = self.text[pos - self.base]
        if depth < MAX_DEPTH and head == "{":
            return (yield from self._object(pos, keep, depth + 1, frozenset()))
        if depth < MAX_DEPTH and head == "[":
            return (yield from self._array(pos, keep, depth + 1))
        if head == '"':
            return (yield from self._string(pos, keep))
        yield from self._rest(pos)
        value, end = _DECODER.raw_decode(self.text, 0)
        self.spent += end
        return value, pos + end

    def _object(self, pos: int, keep: bool, depth: int,
                wanted: frozenset[str]) -> Generator[int, None, tuple[Any, int]]:
        """An object a member at a time: all of it if ``keep``, else only the ``wanted`` members."""
        out = dict[str, Any]()
        pos = self._gap(pos + 1)
        if pos < 0:
            pos = yield from self._space(pos)
        if self._is("}", pos):
            return out, pos + 1
        while True:
            if not self._is('"', pos):
                raise ValueError("expecting a member's name")
            key, pos = yield from self._string(pos, keep or bool(wanted))
            pos = self._gap(pos)
            if pos < 0:
                pos = yield from self._space(pos)
            if not self._is(":", pos):
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
            if self._is(",", pos):
                pos = self._gap(pos + 1)
                if pos < 0:
                    pos = yield from self._space(pos)
            elif self._is("}", pos):
                return out, pos + 1
            else:
                raise ValueError("expecting ',' or '}'")

    def _array(self, pos: int, keep: bool, depth: int) -> Generator[int, None, tuple[Any, int]]:
        """An array an element at a time."""
        out = list[Any]()
        pos = self._gap(pos + 1)
        if pos < 0:
            pos = yield from self._space(pos)
        if self._is("]", pos):
            return out, pos + 1
        while True:
            value, end = self._try(pos)
            value, pos = (value, end) if end >= 0 else (yield from self._value(pos, keep, depth))
            if keep:
                out.append(value)
            pos = self._gap(pos)
            if pos < 0:
                pos = yield from self._space(pos)
            if self._is(",", pos):
                pos = self._gap(pos + 1)
                if pos < 0:
                    pos = yield from self._space(pos)
            elif self._is("]", pos):
                return out, pos + 1
            else:
                raise ValueError("expecting ',' or ']'")

    def _string(self, pos: int, keep: bool) -> Generator[int, None, tuple[Any, int]]:
        """A string a run at a time: checked as the parser checks it, decoded by it if ``keep``."""
        if not keep:
            return (yield from self._skip_string(pos))
        parts, at = [], pos + 1
        while True:
            yield from self._fill(at)
            if self.spent >= PIECE:
                yield self._turn()
            base = self.base
            stop = min(at + REACH, self.stop)  # (a run is checked, then decoded: a piece's worth)
            end = base + _STRING_RUN.match(self.text, at - base, stop - base).end()  # type: ignore[union-attr]
            self.spent += (end - at) // SCAN + 1
            run = self.text[at - base:end - base]
            if "\\" in run:
                run = _UNESCAPE(run + '"', 0)[0]
                self.spent += (end - at) // SCAN + 1
            parts.append(run)
            if self._is('"', end):
                return "".join(parts), end + 1
            if (self.final and stop == self.stop) or end < stop - _CUT:
                raise ValueError("not a JSON string")
            at = end

    def _skip_string(self, pos: int) -> Generator[int, None, tuple[None, int]]:
        """A string checked by the parser's own string reader a run at a time (ten times the pace of the run's
        pattern), each run cut where no escape is: before the run of backslashes near the cut, or inside it between
        two (each ``\\\\``)."""
        at = pos + 1
        while True:
            yield from self._fill(at)
            if self.spent >= PIECE:
                yield self._turn()
            text, base = self.text, self.base
            cut = at + REACH
            if self.final and cut >= self.stop:
                cut = self.stop
            else:
                slash = base + text.rfind("\\", max(at, cut - _CUT) - base, cut - base)
                if slash >= base:  # (an escape is at most 12 characters: a surrogate pair's; it cannot reach the cut)
                    cut = at + len(text[at - base:slash + 1 - base].rstrip("\\"))
                    if cut == at:  # backslashes from here on: escaped ones, two by two
                        cut = at + (slash - at) // 2 * 2
            part = text[at - base:cut - base]
            self.spent += len(part) // SCAN + 1
            _, end = _UNESCAPE(part + '"', 0)  # (raises on what json.loads refuses: a control character, a bad escape)
            if end <= len(part):
                return None, at + end
            if self.final and cut == self.stop:
                raise ValueError("an unterminated string")
            at = cut
