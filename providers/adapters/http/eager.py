"""A send's future: its coroutine run up to its first wait in the calling task (an eager task), and settled when
nobody waits for it any more."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def eager(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """Run ``coro`` up to its first wait now, in the calling task, and the rest in a task of its own (Python
    3.12's eager tasks, for one coroutine). Only for code that binds nothing to the current task (no
    ``asyncio.timeout``, no anyio cancel scope) across that wait."""
    loop = asyncio.get_running_loop()
    try:
        waiting = coro.send(None)
    except StopIteration as stop:
        done: asyncio.Future[T] = loop.create_future()
        done.set_result(stop.value)
        return done
    except Exception as exc:
        failed: asyncio.Future[T] = loop.create_future()
        failed.set_exception(exc)
        return failed
    return loop.create_task(_resumed(coro, waiting))


async def _resumed(coro: Coroutine[Any, Any, T], waiting: Any) -> T:
    return await _Resume(coro, waiting)


class _Resume(Generic[T]):
    """Awaits a coroutine already stepped once, which is waiting on ``waiting``: ``yield from`` by hand."""

    __slots__ = ("coro", "waiting")

    def __init__(self, coro: Coroutine[Any, Any, T], waiting: Any) -> None:
        self.coro = coro
        self.waiting = waiting

    def __await__(self) -> Generator[Any, Any, T]:
        coro, waiting = self.coro, self.waiting
        self.waiting = None
        while True:
            try:
                sent = yield waiting
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation, or an exception thrown in: into the coroutine
                try:
                    waiting = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
            else:
                try:
                    waiting = coro.send(sent)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]


def settle(task: asyncio.Future[Any]) -> None:
    """A send abandoned (the lane stopped, the generator closed) is cancelled; its outcome is taken so that it is
    never reported as an exception nobody retrieved."""
    if not task.done():
        task.cancel()
    task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
