"""Opening the files a user names (recordings, traces, configs, scenarios, prompts): regular files only, so a FIFO,
a socket or a device is one clear error, never an ``open()`` that blocks where no signal can end it."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO

_KINDS: dict[int, str] = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket",
                          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
                          stat.S_IFDIR: "a folder"}


def not_regular(mode: int) -> str | None:
    """What a file of this ``st_mode`` is when it is not a regular file (``None`` when it is one)."""
    if stat.S_ISREG(mode):
        return None
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def why_not_regular(path: Path | str) -> str | None:
    """Why ``path`` cannot be read as a file (``no such file``, ``cannot read it (it is a FIFO (named pipe), not a
    regular file)``), or ``None`` when it is a regular file. Looks without opening it."""
    try:
        kind = not_regular(os.stat(path).st_mode)
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot read it ({exc.strerror or exc})"
    return None if kind is None else f"cannot read it (it is {kind}, not a regular file)"


def open_regular(path: Path | str) -> IO[bytes]:
    """``path`` opened to read bytes, when it is a regular file; else an ``OSError`` whose ``strerror`` says what it
    is (``it is a FIFO (named pipe), not a regular file``). Opened without blocking (a FIFO with no writer would
    wait in ``open()`` forever), then checked on the open file itself, so nothing can swap it in between."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        kind = not_regular(os.fstat(fd).st_mode)
        if kind is not None:
            raise OSError(errno.EINVAL, f"it is {kind}, not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_text(path: Path | str) -> str:
    """A regular file's whole text as UTF-8 (a ``UnicodeDecodeError`` when it is not); see :func:`open_regular`."""
    with open_regular(path) as fh:
        return fh.read().decode("utf-8")
