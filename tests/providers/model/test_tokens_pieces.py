"""Long text is counted in pieces that end at word breaks, so a megabyte answer takes linear time and its count is
exact; one word longer than a piece (a hostile server's ``yyyy...``) is cut, within a token per cut."""

from __future__ import annotations

import pytest

from tokrace.providers.model.tokens import PIECE_CHARS, WORD_CUT_CHARS, count, get_encoding


def test_a_long_answer_counted_in_pieces_gives_the_whole_texts_count() -> None:
    _, enc = get_encoding("")
    assert enc is not None
    text = "".join(f"word{i} is, at {i * 7} µs: fine.\n" if i % 5 else f"«{i}»  " for i in range(40_000))
    assert len(text) > 10 * PIECE_CHARS
    found = count(text)
    assert found is not None and found[0] == len(enc.encode_ordinary(text))


def test_one_huge_word_is_cut_and_counted_within_a_token_per_cut() -> None:
    _, enc = get_encoding("")
    assert enc is not None
    word = "y" * (3 * PIECE_CHARS)
    found = count(word)
    assert found is not None
    exact = len(enc.encode_ordinary(word))
    assert abs(found[0] - exact) <= len(word) // WORD_CUT_CHARS


class _Spy:
    """An encoding that notes the longest text it was asked to encode."""

    def __init__(self, enc: object) -> None:
        self.enc = enc
        self.longest = 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.longest = max(self.longest, len(text))
        return self.enc.encode_ordinary(text)  # type: ignore[attr-defined, no-any-return]

    def decode_bytes(self, tokens: list[int]) -> bytes:
        return self.enc.decode_bytes(tokens)  # type: ignore[attr-defined, no-any-return]


def test_the_live_counter_cuts_one_huge_word_as_count_does() -> None:
    """The screen's counter encoded a 10 MB word whole (its time grows faster than its length)."""
    from tokrace.providers.model.tokens import IncrementalCounter

    _, enc = get_encoding("")
    spy = _Spy(enc)
    counter = IncrementalCounter(spy)
    word = "y" * (3 * PIECE_CHARS + 5)
    counter.feed(word[:10])
    counter.feed(word[10:])
    counter.feed("y and more")
    assert spy.longest <= PIECE_CHARS
    exact = len(enc.encode_ordinary(word + "y and more"))  # type: ignore[attr-defined]
    assert abs(counter.total - exact) <= len(word) // WORD_CUT_CHARS + 2


def test_a_huge_answer_of_one_word_is_encoded_once_in_short_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """60 events of 4 MB of one word took 78 s of CPU: counting it 64K characters at a time, the end of each of
    those was encoded whole (the tokenizer's time per character grows with a word's length)."""
    from tokrace.providers.metrics.text_count import count_text
    from tokrace.providers.model import tokens

    _, enc = get_encoding("")
    spy = _Spy(enc)
    seen: list[int] = []
    real = spy.encode_ordinary

    def encode(text: str) -> list[int]:
        seen.append(len(text))
        return real(text)

    spy.encode_ordinary = encode  # type: ignore[method-assign]
    monkeypatch.setattr(tokens, "get_encoding", lambda model="": ("spy", spy))
    pieces = ["y" * 1_000_000] * 3
    counted = count_text(pieces)
    assert counted is not None
    assert max(seen) <= WORD_CUT_CHARS
    assert sum(seen) == 3_000_000  # every character once
    exact = len(enc.encode_ordinary("y" * 3_000_000))  # type: ignore[attr-defined]
    assert abs(counted[0] - exact) <= 3_000_000 // WORD_CUT_CHARS + 3
