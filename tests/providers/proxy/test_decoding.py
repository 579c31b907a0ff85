"""The measured copy of a compressed body: decoded to a cap, whatever the body expands to."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Callable

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


def test_a_br_body_decodes_piece_by_piece_and_a_br_bomb_only_up_to_the_cap() -> None:
    import brotli

    packed = brotli.compress(b"usage " * 1000)
    decoder = BodyDecoder("br")
    assert b"".join(decoder.feed(packed[i:i + 7]) for i in range(0, len(packed), 7)) == b"usage " * 1000
    bomb = brotli.compress(b"\0" * 50_000_000)
    capped = BodyDecoder("br", cap=1000)
    assert len(peak_of(capped.feed, bomb)) == 1000 and capped.capped
    with pytest.raises(Unreadable, match="br body that does not decode"):
        BodyDecoder("br").feed(b"\xff" * 64)


def test_a_zstd_body_decodes_piece_by_piece_and_a_zstd_bomb_only_up_to_the_cap() -> None:
    import zstandard

    packed = zstandard.ZstdCompressor().compress(b"usage " * 1000)
    decoder = BodyDecoder("zstd")
    assert b"".join(decoder.feed(packed[i:i + 7]) for i in range(0, len(packed), 7)) == b"usage " * 1000
    bomb = zstandard.ZstdCompressor(level=19).compress(b"\0" * 50_000_000)
    capped = BodyDecoder("zstd", cap=1000)
    assert len(peak_of(capped.feed, bomb)) == 1000 and capped.capped
    assert capped.feed(bomb) == b""
    with pytest.raises(Unreadable, match="zstd body that does not decode"):
        BodyDecoder("zstd").feed(b"\xff" * 64)


def peak_of(decode: Callable[[bytes], bytes], data: bytes) -> bytes:
    """What ``decode`` gives for ``data``, held to a small peak of Python memory (a bomb never expands whole)."""
    tracemalloc.start()
    try:
        out = decode(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, f"decoding held {peak:,} bytes at its peak"
    return out
