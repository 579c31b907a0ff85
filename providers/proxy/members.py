"""The few top-level members of a big JSON request read a member, and a big array an element, at a time: each piece a
short call of the C parser, the reader yielding between them (docs/design.md §13)."""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from typing import Any, Final

WHOLE_BYTES: Final[int] = 256 * 1024
"""A body up to this size is parsed at once (a couple of milliseconds); a bigger one piece by piece: ``json.loads`` of
4 MB held the interpreter for 30 to 60 ms, and no relay thread could forward a chunk meanwhile."""

_DECODER: Final[json.JSONDecoder] = json.JSONDecoder()
_SPACE: Final[re.Pattern[str]] = re.compile(r"[ \t\n\r]*")

Reading = Generator[None, None, "dict[str, Any] | None"]
"""A reader under way: advance it (``next``) until it returns its result (``StopIteration.value``)."""


def members(body: bytes, wanted: frozenset[str]) -> Reading:
    """The ``wanted`` members of the JSON object ``body`` (as ``json.loads`` would give them; none of another JSON
    value), or ``None`` when it is not JSON; yields between pieces of work."""
    if len(body) <= WHOLE_BYTES:
        try:
            whole = json.loads(body)
        except (ValueError, RecursionError):
            return None
        return {k: v for k, v in whole.items() if k in wanted} if isinstance(whole, dict) else {}
    try:
        text = body.decode(json.detect_encoding(body))
    except (UnicodeDecodeError, LookupError):
        return None
    yield
    try:
        return (yield from _object(text, wanted))
    except (ValueError, RecursionError):
        return None


def _space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    assert match is not None
    return match.end()


def _object(text: str, wanted: frozenset[str]) -> Reading:
    pos = _space(text, 0)
    if not text.startswith("{", pos):
        pos = yield from _skip(text, pos)
        return {} if _space(text, pos) == len(text) else None
    out: dict[str, Any] = {}
    pos = _space(text, pos + 1)
    if not text.startswith("}", pos):
        while True:
            if not text.startswith('"', pos):
                return None
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _space(text, pos)
            if not text.startswith(":", pos):
                return None
            pos = _space(text, pos + 1)
            if key in wanted:
                out[key], pos = _DECODER.raw_decode(text, pos)
            else:
                pos = yield from _skip(text, pos)
            pos = _space(text, pos)
            if text.startswith(",", pos):
                pos = _space(text, pos + 1)
                continue
            if text.startswith("}", pos):
                break
            return None
    return out if _space(text, pos + 1) == len(text) else None


def _skip(text: str, pos: int) -> Generator[None, None, int]:
    """Past the value at ``pos`` (an array an element at a time), checked as the parser checks it."""
    if not text.startswith("[", pos):
        _, pos = _DECODER.raw_decode(text, pos)
        yield
        return pos
    pos = _space(text, pos + 1)
    if text.startswith("]", pos):
        return pos + 1
    while True:
        _, pos = _DECODER.raw_decode(text, pos)
        yield
        pos = _space(text, pos)
        if text.startswith(",", pos):
            pos = _space(text, pos + 1)
        elif text.startswith("]", pos):
            return pos + 1
        else:
            raise ValueError(f"a malformed array at {pos}")
