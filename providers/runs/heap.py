"""The C heap set up for huge events: on glibc, every block from 1 MB on is a mapping of its own, given back to the
system when freed (docs/performance.md#hostile-input)."""

from __future__ import annotations

import os
import sys
from typing import Final

MMAP_THRESHOLD: Final[int] = 1 << 20
"""Blocks from this size on are mapped on their own. glibc starts at 128 KB but raises its threshold to the size of
each mapped block freed (up to 32 MB): after one huge event, the next ones (the parser's buffer, their text, their
JSON) came from the main heap, which cannot give back what is freed below its top. 60 events of 4 MB then cost
twice what one did; with the threshold fixed they cost what one does. Nothing a lane does per token is that large."""

M_MMAP_THRESHOLD: Final[int] = -3
"""glibc's ``mallopt`` parameter for it (``malloc.h``)."""

TRIM_THRESHOLD: Final[int] = MMAP_THRESHOLD
"""Free memory at the main heap's top is given back to the system only beyond this. Fixing the mmap threshold also
fixes glibc's trim threshold, at 128 KB: every socket read (asyncio reads into a 256 KB block, then shrinks it to what
came) then grew the heap and gave it back, two ``brk`` calls and their page faults per read, on the proxy's path
between a chunk's arrival and its forwarding (57 of its 165 ms of CPU per 1,000 chunks at 750 chunks/s). Blocks this
size and up are mapped on their own, so what stays at the top is below a megabyte."""

M_TRIM_THRESHOLD: Final[int] = -1
"""glibc's ``mallopt`` parameter for it (``malloc.h``)."""

_ENV: Final[str] = "MALLOC_MMAP_THRESHOLD_"
"""glibc's own environment variable for it: a person who set it keeps their choice."""


def fix_mmap_threshold() -> bool:
    """Fix glibc malloc's mmap threshold at :data:`MMAP_THRESHOLD` and its trim threshold at :data:`TRIM_THRESHOLD`
    (see there); whether they were. Elsewhere (macOS, Windows, musl, a Python without ctypes) nothing is changed."""
    if not sys.platform.startswith("linux") or _ENV in os.environ:
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):  # not glibc: its parameters may mean something else
            return False
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD,
                                                                                            TRIM_THRESHOLD))
    except (ImportError, OSError, AttributeError):
        return False
