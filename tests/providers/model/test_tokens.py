"""Token counting without usage: offline tiktoken only, and cheap per delta while streaming."""

from __future__ import annotations

import hashlib
import random
import weakref
from pathlib import Path
from typing import Any

import pytest

from tokrace.providers.adapters.synthetic import PASSAGE, pieces
from tokrace.providers.model import tokens


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "tiktoken-cache"
    directory.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(directory))
    return directory


@pytest.mark.parametrize(("model", "expected"), [
    ("gpt-5.6-sol", True), ("gpt-4o-mini", True), ("openai/gpt-4.1", True), ("o3-mini", True),
    ("gpt-oss-120b", True), ("gpt-4", False), ("gpt-3.5-turbo", False), ("claude-sonnet-4", False),
    ("llama-3.3-70b", False),
])
def test_models_that_tiktoken_maps_to_o200k_are_recognised(model: str, expected: bool) -> None:
    assert tokens.wants_o200k(model) is expected


def test_without_a_cached_o200k_file_cl100k_counts(cache_dir: Path) -> None:
    assert tokens.encoding_name_for("gpt-5.6-sol") == "cl100k_base"
    assert tokens.count("Hello world", "gpt-5.6-sol") == (2, "cl100k_base")


def test_a_damaged_o200k_cache_file_is_ignored_rather_than_downloaded_again(cache_dir: Path) -> None:
    (cache_dir / hashlib.sha1(tokens.O200K_URL.encode()).hexdigest()).write_bytes(b"not a bpe file")
    assert not tokens.o200k_cached()
    assert tokens.encoding_name_for("gpt-5.6-sol") == "cl100k_base"


def test_models_outside_o200k_count_with_cl100k() -> None:
    assert tokens.encoding_name_for("llama-3.3-70b") == "cl100k_base"


def test_an_encoding_that_cannot_load_falls_back_to_cl100k(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "o200k_cached", lambda: True)
    real = tokens._encoding

    def only_cl100k(name: str) -> object:
        if name == "o200k_base":
            raise ValueError("no o200k here")
        return real(name)

    monkeypatch.setattr(tokens, "_encoding", only_cl100k)
    name, encoding = tokens.get_encoding("gpt-5.6-sol")
    assert name == "cl100k_base" and encoding is not None


def test_count_is_none_when_no_tokenizer_can_load(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> object:
        raise OSError("no data")

    monkeypatch.setattr(tokens, "_encoding", broken)
    assert tokens.count("Hello", "gpt-4") is None


def test_incremental_counter_matches_a_full_encode_fed_token_by_token() -> None:
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    text = PASSAGE * 4
    counter = tokens.IncrementalCounter(encoding)
    for piece in pieces(text):
        counter.feed(piece)
    assert counter.total == len(encoding.encode_ordinary(text))


def test_incremental_counter_is_exact_fed_character_by_character() -> None:
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    text = PASSAGE * 2
    counter = tokens.IncrementalCounter(encoding)
    totals = [counter.feed(ch) for ch in text]
    assert counter.total == len(encoding.encode_ordinary(text)) == totals[-1]


def test_incremental_counter_counts_every_prefix_exactly_however_the_text_is_cut() -> None:
    """The count after each delta is the tokenizer's count of all the text so far, so a delta joining several
    chunks counts what the chunks would, one by one."""
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    parts = [*PARTS[:40], *PARTS[-30:], " 12345678 don't  stop\n\n  x", "\u0301y z"]
    rng = random.Random(3)
    for _ in range(4):
        _feed_exactly(tokens.IncrementalCounter(encoding), encoding, parts, rng, 1, 9)


def _feed_exactly(counter: tokens.IncrementalCounter, encoding: Any, parts: list[str], rng: random.Random,
                  fewest: int, most: int) -> str:
    """Feed ``parts`` joined a random ``fewest``..``most`` at a time, holding the count after each delta to the
    tokenizer's count of all the text so far; the text fed."""
    text, at = "", 0
    while at < len(parts):
        k = rng.randint(fewest, most)
        piece = "".join(parts[at:at + k])
        at += k
        text += piece
        assert counter.feed(piece) == len(encoding.encode_ordinary(text))
    return text


def test_text_without_spaces_is_counted_within_a_fraction_of_a_percent() -> None:
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    text = PASSAGE.replace(" ", "") * 2
    counter = tokens.IncrementalCounter(encoding)
    for ch in text:
        counter.feed(ch)
    exact = len(encoding.encode_ordinary(text))
    assert abs(counter.total - exact) / exact < 0.005


def test_incremental_counter_re_encodes_only_a_short_tail() -> None:
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    counter = tokens.IncrementalCounter(encoding)
    longest = 0
    for piece in pieces(PASSAGE * 4):
        counter.feed(piece)
        longest = max(longest, len(counter._tail))
    assert longest <= tokens.TAIL_CHARS + 16


def _reference_totals(encoding: Any, parts: list[str]) -> list[int]:
    """The incremental count without the memo: the tail encoded on every delta."""
    committed, tail, totals = 0, "", []
    for text in parts:
        tail += text
        if len(tail) > tokens.TAIL_CHARS and (cut := tokens.word_break(tail)):
            committed += len(encoding.encode_ordinary(tail[:cut]))
            tail = tail[cut:]
            totals.append(committed + len(encoding.encode_ordinary(tail)))
            continue
        toks = encoding.encode_ordinary(tail)
        if len(tail) > tokens.TAIL_CHARS and len(toks) > 2:
            keep = toks[:-2]
            try:
                kept = encoding.decode_bytes(keep).decode("utf-8")
            except UnicodeDecodeError:
                kept = ""
            if kept and tail.startswith(kept):
                committed += len(keep)
                tail = tail[len(kept):]
                totals.append(committed + 2)
                continue
        totals.append(committed + len(toks))
    return totals


class _Counting:
    """An encoding that counts the calls into the tokenizer."""

    def __init__(self, encoding: Any) -> None:
        self.encoding = encoding
        self.calls = 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.calls += 1
        return self.encoding.encode_ordinary(text)  # type: ignore[no-any-return]

    def decode_bytes(self, toks: list[int]) -> bytes:
        return self.encoding.decode_bytes(toks)  # type: ignore[no-any-return]


PARTS = [*pieces(PASSAGE) * 4, *"Über ☃ 12345 \n\n  x", " é", "\u0301", "\U0001f600", *pieces(PASSAGE) * 2]


def test_the_tail_memo_gives_the_counts_the_tokenizer_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    """Repeated text is counted from the memo (far fewer tokenizer calls) to exactly the same totals, delta by
    delta, as re-encoding every tail; a second counter of the same encoding shares the memo."""
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    monkeypatch.setattr(tokens, "_MEMOS", weakref.WeakKeyDictionary())
    counting = _Counting(encoding)
    counter = tokens.IncrementalCounter(counting)
    assert [counter.feed(p) for p in PARTS] == _reference_totals(encoding, PARTS)
    assert counting.calls < len(PARTS) * 2 // 3  # the passage from its third time on comes from the memo
    again = tokens.IncrementalCounter(counting)
    before = counting.calls
    assert [again.feed(p) for p in PARTS] == _reference_totals(encoding, PARTS)
    assert counting.calls - before < len(PARTS) // 10


def test_a_full_memo_starts_afresh_and_still_counts_right(monkeypatch: pytest.MonkeyPatch) -> None:
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    monkeypatch.setattr(tokens, "MEMO_SIZE", 50)
    monkeypatch.setattr(tokens, "_MEMOS", weakref.WeakKeyDictionary())
    counting = _Counting(encoding)
    counter = tokens.IncrementalCounter(counting)
    totals = []
    for p in PARTS:
        totals.append(counter.feed(p))
        assert len(tokens._MEMOS[counting]) <= 50
    assert totals == _reference_totals(encoding, PARTS)


def test_a_counter_whose_text_does_not_repeat_stops_using_the_memo_and_counts_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    monkeypatch.setattr(tokens, "MEMO_TRIAL", 100)
    monkeypatch.setattr(tokens, "_MEMOS", weakref.WeakKeyDictionary())
    rng = random.Random(7)
    words = pieces(PASSAGE)
    varied = ["".join(rng.choice(words) for _ in range(rng.randint(1, 3))) for _ in range(600)]
    counting = _Counting(encoding)
    counter = tokens.IncrementalCounter(counting)
    assert [counter.feed(p) for p in varied] == _reference_totals(encoding, varied)
    assert counter._memo is None
    assert counting.calls > len(varied) - 50  # nearly every tail went to the tokenizer
    monkeypatch.setattr(tokens, "MEMO_TRIAL", 1024)
    repeating = tokens.IncrementalCounter(counting)  # a lane whose text repeats keeps it
    assert [repeating.feed(p) for p in PARTS] == _reference_totals(encoding, PARTS)
    assert repeating._memo is not None


def test_long_tails_of_joined_chunks_are_counted_but_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    monkeypatch.setattr(tokens, "_MEMOS", weakref.WeakKeyDictionary())
    counting = _Counting(encoding)
    counter = tokens.IncrementalCounter(counting)
    joined = ["".join(PARTS[i:i + 40]) for i in range(0, len(PARTS), 40)]
    text = ""
    for piece in joined:
        text += piece
        assert counter.feed(piece) == len(encoding.encode_ordinary(text))
    assert all(len(tail) <= tokens.MEMO_CHARS for tail in tokens._MEMOS[counting])


def test_the_word_breaks_split_text_where_word_break_finds_its_breaks() -> None:
    """Cut at every word break, a text falls into the same words as cutting it at the last break again and again
    (:func:`tokens.word_break`, ``str.isalnum``), whatever its characters."""
    rng = random.Random(5)
    alphabet = "ab1 _.,\n\t\u00e9\u0301\u0660\u00b2\u2167\u4e00\u0130 -'"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        cuts, at = [], len(text)
        while (at := tokens.word_break(text[:at])) > 0:
            cuts.append(at)
        words = [text[a:b] for a, b in zip([0, *reversed(cuts)], [*reversed(cuts), len(text)], strict=True)]
        assert tokens._WORD_BREAKS.split(text) == words


BIG_PARTS = [*pieces(PASSAGE) * 3, *" Über ☃ 12345  678\n\n  x é\u0301 \U0001f600 don't", *pieces(PASSAGE)]


def test_long_deltas_counted_word_by_word_count_every_prefix_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deltas that commit hundreds of characters at once (a read's many chunks joined) are counted from the word
    memo to the tokenizer's count of all the text so far, at every delta, the memo cold or warm; repeated text
    then needs far fewer calls into the tokenizer than words."""
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    monkeypatch.setattr(tokens, "_WORD_MEMOS", weakref.WeakKeyDictionary())
    counting = _Counting(encoding)
    rng = random.Random(8)
    for _ in range(3):
        counter = tokens.IncrementalCounter(counting)
        before = counting.calls
        text = _feed_exactly(counter, encoding, BIG_PARTS, rng, 60, 300)
        calls = counting.calls - before
    assert counter._words_memo is not None and counter._words_found > 0
    assert calls < len(text.split()) // 10  # warm: the words of the passage come from the memo


def test_a_counter_whose_words_do_not_repeat_stops_using_the_word_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text whose words never come again (random strings) is counted exactly, and after the trial the counter
    encodes what it commits whole; the memo never holds more than its bound."""
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    monkeypatch.setattr(tokens, "_WORD_MEMOS", weakref.WeakKeyDictionary())
    monkeypatch.setattr(tokens, "WORDS_SIZE", 500)
    rng = random.Random(2)
    counter, text = tokens.IncrementalCounter(encoding), ""
    for _ in range(60):
        piece = " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(rng.randint(3, 9)))
                         for _ in range(120)) + " "
        text += piece
        assert counter.feed(piece) == len(encoding.encode_ordinary(text))
        assert len(tokens._WORD_MEMOS[encoding]) <= 500
    assert counter._words_memo is None and counter._words_looked >= tokens.WORDS_TRIAL


def test_words_repeated_within_one_long_text_are_found_in_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lane's first count can be one long text (what came before the tokenizer loaded, counted at once): its
    repeated words are found in the memo as it fills, so the trial keeps the memo for a stream that repeats."""
    _, encoding = tokens.get_encoding("")
    assert encoding is not None
    monkeypatch.setattr(tokens, "_WORD_MEMOS", weakref.WeakKeyDictionary())
    counter, text = tokens.IncrementalCounter(encoding), PASSAGE * 12
    assert counter.feed(text) == len(encoding.encode_ordinary(text))
    assert counter._words_found > counter._words_looked * 3 // 4
    more = PASSAGE * 30
    for piece in [more[at:at + 900] for at in range(0, len(more), 900)]:
        text += piece
        assert counter.feed(piece) == len(encoding.encode_ordinary(text))
    assert counter._words_looked >= tokens.WORDS_TRIAL and counter._words_memo is not None
