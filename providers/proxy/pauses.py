"""The garbage collector's pauses kept off the relay's path: collections run when the measuring has caught up with
the chunks forwarded, never inside a chunk's forwarding (docs/design.md §13)."""

from __future__ import annotations

import asyncio
import gc
from typing import Final

TICK_S: Final[float] = 0.1
"""How often the collector looks when no measuring calls it (an idle session, the live screen's frames)."""

OVERDUE: Final[int] = 10
"""A full collection waits for a quiet moment (no chunk measured for a tick) unless this many times overdue."""


class Collector:
    """While on, Python's automatic collections are off (one can fall on any allocation, the relay's included: a
    young one took 0.1 ms, a full one 60 ms over the imports' objects); :meth:`caught_up` and a timer run the same
    collections Python would, by its own thresholds, at moments when no chunk waits. What lives at the start is
    frozen out of every collection's way."""

    def __init__(self) -> None:
        self._was_enabled: bool | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._busy = False
        self.runs = [0, 0, 0]
        """Collections run, by generation."""

    @property
    def on(self) -> bool:
        return self._was_enabled is not None

    def start(self) -> None:
        """Collect what start-up left, freeze what lives on, and take over the collections (on the running loop)."""
        if self.on:
            return
        gc.collect()
        gc.freeze()
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = asyncio.get_running_loop().call_later(TICK_S, self._tick)

    def caught_up(self) -> None:
        """The measuring has read everything the relay handed on: a collection now holds up no chunk."""
        self._busy = True
        self._collect(quiet=False)

    def _tick(self) -> None:
        self._collect(quiet=not self._busy)
        self._busy = False
        self._timer = asyncio.get_running_loop().call_later(TICK_S, self._tick)

    def _collect(self, quiet: bool) -> None:
        if not self.on:
            return
        young, middle, old = gc.get_count()
        first, second, third = gc.get_threshold()
        if young < first or first <= 0:
            return
        generation = 0
        if middle >= second:
            generation = 1
            if old >= third and (quiet or old >= OVERDUE * third):
                generation = 2
        gc.collect(generation)
        self.runs[generation] += 1

    def stop(self) -> None:
        """Give the collections back to Python as they were, and unfreeze."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._was_enabled is None:
            return
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()
        self._was_enabled = None
