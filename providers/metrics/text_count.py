"""The tokenizer's count of a turn's streamed text, a slice at a time: exact, linear, and never the whole answer (or
one huge event beside another) in memory at once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

from ..model import tokens as tokenizer
from ..model.events import Delta, Event

COUNT_CHUNK: Final[int] = 1 << 16
"""Characters of text the tokenizer counts at a time (its output, a list of ints, is ~70 bytes per token)."""


def count_text(pieces: Iterable[str], model: str = "") -> tuple[int, str] | None:
    """The tokenizer's count of the pieces joined (``tokens.count``), read a chunk at a time so that a long answer
    is never one string nor one list of tokens: each chunk ends before a space that follows a letter or a digit,
    where every tiktoken encoding's pre-tokenizer splits anyway (a run of letters or digits ends at the space,
    no piece holds both, and the pieces after it do not depend on what came before), so the chunks' counts add
    up to the whole text's. Text with no such place is counted whole. A piece longer than a tokenizer's piece (a
    misbehaving server's 4 MB event) is taken a slice at a time, never joined whole with what came before it."""
    total, buffered, size, due = 0, [], 0, COUNT_CHUNK
    for piece in _slices(pieces):
        buffered.append(piece)
        size += len(piece)
        if size < due:
            continue
        text = "".join(buffered)
        cut = tokenizer.word_break(text)
        huge = not cut and len(text) > tokenizer.PIECE_CHARS
        if huge:  # one huge word (a hostile server's): counted in pieces as count() cuts it, not held to its end
            cut = len(text) - tokenizer.TAIL_CHARS
        if cut:
            counted = tokenizer.count(text, model, cut)
            if counted is None:
                return None
            total += counted[0]
            text = text[cut:]
        buffered, size = [text], len(text)
        # a text without a break is looked at again when twice as long, or a piece longer once that long: linear
        due = size + tokenizer.PIECE_CHARS if huge else max(COUNT_CHUNK, 2 * size)
    counted = tokenizer.count("".join(buffered), model)
    return None if counted is None else (total + counted[0], counted[1])


def _slices(pieces: Iterable[str]) -> Iterator[str]:
    """The pieces in order, one longer than ``tokenizer.PIECE_CHARS`` cut into slices that long: what counts them
    then holds a slice's copy besides the piece, never one as large as it."""
    step = tokenizer.PIECE_CHARS
    for piece in pieces:
        if len(piece) <= step:
            yield piece
        else:
            for at in range(0, len(piece), step):
                yield piece[at:at + step]
        del piece  # not held while the next one is read (a huge one, read back from a lane's log)


def delta_texts(events: Iterable[Event]) -> Iterator[str]:
    """The texts of a turn's deltas, in order, each let go before the next event is read: a huge delta read back
    from a lane's log is not held beside the next one."""
    for e in events:
        if isinstance(e, Delta):
            text = e.text
            del e
            yield text
            del text
