"""The process's parked reader threads: a connection hands its blocking reads to one instead of starting a thread
inside a first request's ``connect_s``."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Final


class ReaderThreads:
    """Parked reader threads, started before the race: ``Thread.start`` waits until the new thread runs, which
    on a busy machine put up to a few milliseconds into a first request's ``connect_s``. A connection hands its
    reading loop to a parked thread instead, and the thread parks again when the connection is closed.

    The pool is as big as the connections to come need: a session's backend reserves a thread per provider
    (:meth:`reserve`) and lets go of its reservations when closed (:meth:`release`); a thread done with its
    connection parks while fewer threads are parked than are reserved (at least one), and ends otherwise, so a
    process that sets providers up again and again keeps as many threads as it uses at once, not one more each
    time."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        """Threads parked, less the jobs (and ends) handed to them and not yet taken."""
        self._wanted = 0
        """Threads reserved for connections to come, by the backends still open."""
        self._threads = 0

    def reserve(self, count: int = 1) -> None:
        """Reserve ``count`` more threads for connections to come: start each one that no parked thread covers."""
        with self._lock:
            self._wanted += count
            missing = max(min(self._wanted - self._idle, count), 0)
            self._idle += missing
        for _ in range(missing):
            self._start()

    def release(self, count: int = 1) -> None:
        """Give back ``count`` reservations; parked threads beyond what is still reserved end."""
        with self._lock:
            self._wanted = max(self._wanted - count, 0)
            surplus = max(self._idle - self._keep(), 0)
            self._idle -= surplus
        for _ in range(surplus):
            self._jobs.put(None)

    def run(self, job: Callable[[], None]) -> None:
        """Run ``job`` on a parked thread (a new one when none is free)."""
        with self._lock:
            free = self._idle > 0
            if free:
                self._idle -= 1
        if not free:
            self._start()
        self._jobs.put(job)

    @property
    def idle(self) -> int:
        return self._idle

    @property
    def wanted(self) -> int:
        """Threads reserved by the backends still open."""
        return self._wanted

    @property
    def threads(self) -> int:
        """Reader threads alive (parked or reading)."""
        return self._threads

    def _keep(self) -> int:
        return max(self._wanted, 1)

    def _start(self) -> None:
        with self._lock:
            self._threads += 1
        threading.Thread(target=self._work, name="tokrace-socket-reader", daemon=True).start()

    def _work(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                try:
                    job()
                finally:
                    with self._lock:
                        park = self._idle < self._keep()
                        if park:
                            self._idle += 1
                if not park:
                    return
        finally:
            with self._lock:
                self._threads -= 1


READERS: Final[ReaderThreads] = ReaderThreads()
"""The process's reader threads."""
