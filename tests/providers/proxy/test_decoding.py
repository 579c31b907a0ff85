"""The measured copy of a compressed body: decoded to a cap, whatever the body expands to."""

from __future__ import annotations

import gzip
import zlib

import pytest

from tokrace.providers.proxy.decoding import BodyDecoder, Unreadable


def test_a_gzip_bomb_decodes_only_up_to_the_cap() -> None:
    bomb = gzip.compress(b"\0" * 20_000_000)
    decoder = BodyDecoder("gzip", cap=1000)
    out = decoder.feed(bomb[:len(bomb) // 2]) + decoder.feed(bomb[len(bomb) // 2:])
    assert len(out) == 1000 and decoder.capped


def test_deflate_and_identity_pass_and_an_unknown_coding_is_unreadable() -> None:
    assert BodyDecoder("deflate").feed(zlib.compress(b"abc")) == b"abc"
    assert BodyDecoder("").feed(b"abc") == b"abc"
    with pytest.raises(Unreadable, match="'x-made-up'"):
        BodyDecoder("x-made-up")
    with pytest.raises(Unreadable, match="does not decode"):
        BodyDecoder("gzip").feed(b"not gzip at all")
