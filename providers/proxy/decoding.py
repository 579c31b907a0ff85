"""The measured copy of a compressed body: decoded piece by piece as it passes (gzip, deflate, br, zstd), never more
than a cap, so a bomb costs a bounded amount of memory; the relayed bytes stay encoded."""

from __future__ import annotations

import contextlib
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
        self._zstd: _Capped | None = None
        if self.coding in ("", "identity"):
            return
        if self.coding in ("gzip", "x-gzip"):
            self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self.coding == "deflate":
            self._obj = zlib.decompressobj()
        elif self.coding == "br":
            self._obj = _module("brotli", "br").Decompressor()
        elif self.coding == "zstd":
            # zstandard's decompressobj has no output limit: its writer hands the output on 128 KB at a time to a
            # sink that stops it at the cap
            self._zstd = _Capped()
            self._obj = _module("zstandard", "zstd").ZstdDecompressor().stream_writer(self._zstd)
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
                # (bounded: never more than the cap out of one piece, however it expands)
                if self._zlib:
                    out = self._obj.decompress(data, self.left + 1)
                elif self._zstd is not None:
                    out = self._zstd.take(self._obj, data, self.left + 1)
                else:
                    out = self._obj.process(data, output_buffer_limit=self.left + 1)
            except Exception as exc:  # (each library has its own error type)
                raise Unreadable(f"a {self.coding} body that does not decode ({exc})") from None
        if len(out) > self.left:
            out, self.capped = out[:self.left], True
        self.left -= len(out)
        return out


class _Full(Exception):
    """The decoded copy reached its cap: stop decoding this piece."""


class _Capped:
    """Where zstandard's stream writer puts its output: kept up to a limit, then it stops the writer."""

    def __init__(self) -> None:
        self._out: list[bytes] = []
        self._left = 0

    def take(self, writer: Any, data: bytes, limit: int) -> bytes:
        """What ``data`` decodes to, at most ``limit`` bytes."""
        self._out, self._left = [], limit
        with contextlib.suppress(_Full):
            writer.write(data)
        return b"".join(self._out)

    def write(self, data: bytes) -> int:
        self._out.append(bytes(data[:self._left]))
        if len(data) >= self._left:
            self._left = 0
            raise _Full
        self._left -= len(data)
        return len(data)


def _module(name: str, coding: str) -> Any:
    try:
        return import_module(name)
    except ImportError:
        raise Unreadable(f"a {coding} body (install the {name} package to measure it)") from None


def decode_whole(data: bytes, coding: str, cap: int = COPY_CAP) -> bytes:
    """A whole body decoded (at most ``cap`` bytes)."""
    return BodyDecoder(coding, cap).feed(data)
