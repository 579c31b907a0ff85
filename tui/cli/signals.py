"""Leaving the screen on a signal as on a quit: SIGTERM and SIGINT end the race (every running lane ends as
``stopped``, the recording is written to its last line), the terminal is restored (alternate screen and mouse
reporting off), and tokrace exits 143 or 130, as a shell reports a process those signals ended."""

from __future__ import annotations

import asyncio
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


def install(quit_with: Callable[[int], None]) -> Callable[[], None]:
    """Make each signal call ``quit_with`` its exit code; returns what takes the handlers away again."""
    loop = asyncio.get_running_loop()
    for sig, code in SIGNALS:
        loop.add_signal_handler(sig, quit_with, code)

    def remove() -> None:
        for sig, _ in SIGNALS:
            loop.remove_signal_handler(sig)

    return remove
