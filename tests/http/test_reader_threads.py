"""The reader-thread pool: threads parked before the race for the connections to come, as many as are reserved,
and no more kept than that however often providers are set up and closed."""

from __future__ import annotations

import threading

from serving import fast_source, provider, tier

from tokrace.providers.adapters.http.backend import READERS, ReaderThreads
from tokrace.providers.serve.server import ServeServer


def wait_until(check: object, timeout: float = 10.0) -> None:
    """Hang guard only: wait (on the threads' own progress) until ``check()`` holds."""
    import time

    end = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < end, "the reader threads never got there"
        time.sleep(0.001)


def test_a_reservation_parks_a_thread_only_when_none_parked_covers_it() -> None:
    pool = ReaderThreads()
    pool.reserve()
    pool.reserve()
    assert pool.idle == 2 and pool.threads == 2
    pool.release(2)  # one stays parked (the pool's floor), the other ends
    wait_until(lambda: pool.threads == 1)
    assert pool.idle == 1
    pool.reserve()  # the parked one covers it
    assert pool.idle == 1 and pool.threads == 1


def test_a_thread_done_with_its_connection_parks_while_reserved_and_ends_when_not() -> None:
    pool = ReaderThreads()
    pool.reserve(3)
    done = threading.Barrier(4)
    for _ in range(3):
        pool.run(lambda: done.wait(10))
    done.wait(10)
    wait_until(lambda: pool.idle == 3)  # all three reserved: they park again
    assert pool.threads == 3
    pool.release(3)
    wait_until(lambda: pool.threads == 1)
    assert pool.idle == 1
    # Nothing reserved: a job still gets a thread, and the pool keeps one parked afterwards.
    ran = threading.Event()
    pool.run(ran.set)
    pool.run(ran.set)
    assert ran.wait(10)
    wait_until(lambda: pool.threads == 1 and pool.idle == 1)


async def test_providers_set_up_and_closed_again_and_again_keep_no_more_threads_than_they_use() -> None:
    """Each provider's prepare reserves a parked thread; its close gives it back: 30 providers one after the other
    (each streaming a turn) leave the process with the threads one of them needs, not 30 more."""
    from tokrace.providers.model.messages import TurnRequest
    from tokrace.providers.timing.clock import LaneClock, RealClock

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
        wait_until(lambda: READERS.threads <= before + 2)
