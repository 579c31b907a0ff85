"""Leaving the screen on a signal as on a quit: SIGTERM and SIGINT end the race (every running lane ends as
``stopped``, the recording is written to its last line), the terminal is restored (alternate screen and mouse
reporting off), and tokrace exits 143 or 130, as a shell reports a process those signals ended."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from typing import Final

EXIT_INTERRUPTED: Final[int] = 130
"""The exit code after SIGINT (128 + 2), on the screen and in ``bench`` alike."""
EXIT_TERMINATED: Final[int] = 143
"""The exit code after SIGTERM (128 + 15)."""

class Terminated(Exception):
    """A headless run ended by SIGTERM (after its lanes ended as stopped and its recording was written)."""


SIGNALS: Final[tuple[tuple[signal.Signals, int], ...]] = (
    (signal.SIGTERM, EXIT_TERMINATED), (signal.SIGINT, EXIT_INTERRUPTED), (signal.SIGHUP, EXIT_TERMINATED - 14))
"""Each signal handled and its exit code (SIGHUP, a closed terminal: 129)."""


def insist(sig: signal.Signals, code: int, then: Callable[[], None]) -> Callable[[], None]:
    """Make ``sig`` call ``then`` on the running loop, and a second ``sig`` end the process at once, as that signal
    does (a shell reports ``code``):
    a signal always ends tokrace, even when the loop is stuck in a call that does not return (asyncio's own signal
    handlers only run once the loop comes back). Returns what puts the previous handler back."""
    loop = asyncio.get_running_loop()
    seen: list[int] = []

    def handler(signum: int, frame: object) -> None:
        if seen:  # the signal again, with its default action: the process ends as that signal ends it
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        seen.append(signum)
        loop.call_soon_threadsafe(then)

    previous = signal.signal(sig, handler)

    def remove() -> None:
        signal.signal(sig, previous)

    return remove


def install(quit_with: Callable[[int], None]) -> Callable[[], None]:
    """Make each signal call ``quit_with`` its exit code (a second one ends the process, see :func:`insist`);
    returns what takes the handlers away again."""
    removers = [insist(sig, code, lambda code=code: quit_with(code)) for sig, code in SIGNALS]  # type: ignore[misc]

    def remove() -> None:
        for remover in removers:
            remover()

    return remove
