"""Long text is counted in pieces that end at word breaks, so a megabyte answer takes linear time and its count is
exact; one word longer than a piece (a hostile server's ``yyyy...``) is cut, within a token per cut."""

from __future__ import annotations

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
