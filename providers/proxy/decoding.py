"""The measured copy of a compressed body: decoded piece by piece as it passes (gzip, deflate, br, zstd), never more
than a cap, so a bomb costs a bounded amount of memory; the relayed bytes stay encoded."""

from __future__ import annotations

import zlib
from importlib import import_module
from typing import Any, Final

COPY_CAP: Final[int] = 64 * 1024 * 1024
"""The most decoded bytes kept or parsed of one body: past it the copy stops (the relay goes on)."""


class Unreadable(Exception):
    """A body the proxy cannot decode to measure (an unknown coding, a missing module, corrupt bytes)."""


class BodyDecoder:
    """Decodes one body's content-coding incrementally, at most ``cap`` bytes in all."""

    def __init__(self, coding: str, cap: int = COPY_CAP) -> None:
        self.coding = coding.strip().lower()
        self.left = cap
        self.capped = False
        self._obj: Any = None
        self._zlib = self.coding in ("gzip", "x-gzip", "deflate")
        if self.coding in ("", "identity"):
            return
        if self.coding in ("gzip", "x-gzip"):
            self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self.coding == "deflate":
            self._obj = zlib.decompressobj()
        elif self.coding == "br":
            self._obj = _module("brotli", "br").Decompressor()
        elif self.coding == "zstd":
            self._obj = _module("zstandard", "zstd").ZstdDecompressor().decompressobj()
        else:
            raise Unreadable(f"a body in the {coding!r} coding")

    def feed(self, data: bytes) -> bytes:
        """The decoded bytes ``data`` brings (up to the cap; then nothing, and :attr:`capped`)."""
        if self.capped or not data:
            return b""
        if self._obj is None:
            out = data
        else:
            try:
                if self._zlib:  # (bounded: never more than the cap out of one piece, however it expands)
                    out = self._obj.decompress(data, self.left + 1)
                else:
                    out = self._obj.process(data) if hasattr(self._obj, "process") else self._obj.decompress(data)
            except Exception as exc:  # (each library has its own error type)
                raise Unreadable(f"a {self.coding} body that does not decode ({exc})") from None
        if len(out) > self.left:
            out, self.capped = out[:self.left], True
        self.left -= len(out)
        return out


def _module(name: str, coding: str) -> Any:
    try:
        return import_module(name)
    except ImportError:
        raise Unreadable(f"a {coding} body (install the {name} package to measure it)") from None


def decode_whole(data: bytes, coding: str, cap: int = COPY_CAP) -> bytes:
    """A whole body decoded (at most ``cap`` bytes)."""
    return BodyDecoder(coding, cap).feed(data)
