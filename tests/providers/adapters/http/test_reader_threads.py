"""The reader-thread pool: threads parked before the race for the connections to come, as many as are reserved,
and no more kept than that however often providers are set up and closed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from serving import fast_source, provider, tier

from tokrace.providers.adapters.http.reader_threads import READERS, ReaderThreads
from tokrace.providers.serve import ServeServer


class Told:
    """A pool's lock that tells whoever waits on ``changed`` each time it is let go: the pool changes its counts
    only under its lock, so a test waits for the counts it expects on the threads' own progress, never polling.
    It wraps the pool's own lock: a thread already waiting for that lock still holds the same one."""

    def __init__(self, lock: Any) -> None:
        self.changed = threading.Condition(lock)

    def __enter__(self) -> None:
        self.changed.acquire()

    def __exit__(self, *exc: object) -> None:
        self.changed.notify_all()
        self.changed.release()


def watched(pool: ReaderThreads) -> ReaderThreads:
    """``pool``, its lock a :class:`Told` (see :func:`wait_until`)."""
    pool._lock = Told(pool._lock)  # type: ignore[assignment]
    return pool


def wait_until(pool: ReaderThreads, check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``check()`` holds, looking again each time a thread of the (watched) pool changes its counts;
    the time out is a hang guard only."""
    told = pool._lock
    assert isinstance(told, Told)
    with told.changed:
        assert told.changed.wait_for(check, timeout), "the reader threads never got there"


def test_a_reservation_parks_a_thread_only_when_none_parked_covers_it() -> None:
    pool = watched(ReaderThreads())
    pool.reserve()
    pool.reserve()
    assert pool.idle == 2 and pool.threads == 2
    pool.release(2)  # one stays parked (the pool's floor), the other ends
    wait_until(pool, lambda: pool.threads == 1)
    assert pool.idle == 1
    pool.reserve()  # the parked one covers it
    assert pool.idle == 1 and pool.threads == 1


def test_a_thread_done_with_its_connection_parks_while_reserved_and_ends_when_not() -> None:
    pool = watched(ReaderThreads())
    pool.reserve(3)
    done = threading.Barrier(4)
    for _ in range(3):
        pool.run(lambda: done.wait(10))
    done.wait(10)
    wait_until(pool, lambda: pool.idle == 3)  # all three reserved: they park again
    assert pool.threads == 3
    pool.release(3)
    wait_until(pool, lambda: pool.threads == 1)
    assert pool.idle == 1
    # Nothing reserved: a job still gets a thread, and the pool keeps one parked afterwards.
    ran = threading.Event()
    pool.run(ran.set)
    pool.run(ran.set)
    assert ran.wait(10)
    wait_until(pool, lambda: pool.threads == 1 and pool.idle == 1)


async def test_providers_set_up_and_closed_again_and_again_keep_no_more_threads_than_they_use(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each provider's prepare reserves a parked thread; its close gives it back: 30 providers one after the other
    (each streaming a turn) leave the process with the threads one of them needs, not 30 more."""
    from tokrace.providers.model.messages import TurnRequest
    from tokrace.providers.timing.clock import LaneClock, RealClock

    monkeypatch.setattr(READERS, "_lock", Told(READERS._lock))
    async with ServeServer(fast_source()) as server:
        before = READERS.threads
        for _ in range(30):
            prov = provider(tier(server, "openai"))
            await prov.prepare()
            assert READERS.idle >= 1  # a thread parked for its first connection
            clock = RealClock()
            async for _event in prov.stream(TurnRequest("hi", max_tokens=5), LaneClock(clock, clock.now())):
                pass
            await prov.aclose()
        wait_until(READERS, lambda: READERS.threads <= before + 2)
