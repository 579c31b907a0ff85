"""The collector's pauses, kept off the relay's path: collections run when the measuring has caught up, a full one
only in a quiet moment, and Python gets its collector back as it was."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokrace.providers.proxy.pauses import OVERDUE, Collector
from tokrace.providers.proxy.routes import Routes, Upstream
from tokrace.providers.proxy.session import ProxySession


@pytest.fixture
def low_thresholds() -> Iterator[None]:
    """Python's thresholds, made small: a young collection after 50 objects, an older one after each younger."""
    kept = gc.get_threshold()
    gc.set_threshold(50, 1, 1)
    yield
    gc.set_threshold(*kept)


async def test_no_collection_falls_on_an_allocation_while_the_collector_is_on(low_thresholds: None) -> None:
    collector = Collector()
    collector.start()
    try:
        assert not gc.isenabled()
        before = gc.get_stats()[0]["collections"]
        made = [[n] for n in range(500)]  # ten times the threshold: Python would have collected ten times
        assert gc.get_stats()[0]["collections"] == before and len(made) == 500
        collector.caught_up()
        assert collector.runs[:1] == [1] and gc.get_count()[0] < 50
    finally:
        collector.stop()


async def test_a_full_collection_waits_for_a_moment_without_chunks(low_thresholds: None) -> None:
    collector = Collector()
    collector.start()
    try:
        gc.collect(1)  # the oldest generation is due, and the middle one
        gc.collect(0)
        made = [[n] for n in range(100)]
        collector.caught_up()  # chunks are being measured: the middle generation only
        assert collector.runs == [0, 1, 0]
        gc.collect(0)
        made += [[n] for n in range(100)]
        collector._busy = False  # a tick with no measuring since the last
        collector._tick()
        assert collector.runs == [0, 1, 1] and made
    finally:
        collector.stop()


async def test_a_full_collection_long_overdue_runs_among_chunks(low_thresholds: None) -> None:
    collector = Collector()
    collector.start()
    try:
        for _ in range(OVERDUE):
            gc.collect(1)
        gc.collect(0)
        made = [[n] for n in range(100)]
        collector.caught_up()
        assert collector.runs == [0, 0, 1] and made
    finally:
        collector.stop()


async def test_stopping_gives_python_its_collector_back() -> None:
    assert gc.isenabled()
    collector = Collector()
    collector.start()
    assert gc.get_freeze_count() > 0
    collector.stop()
    collector.stop()  # (again: nothing)
    assert gc.isenabled() and gc.get_freeze_count() == 0


async def test_a_proxy_session_runs_its_collections_off_the_relays_path(tmp_path: Path) -> None:
    up = Upstream.parse("http://127.0.0.1:9")
    session = ProxySession(Routes(up, up), tmp_path / "r.jsonl")
    await session.start()
    await asyncio.sleep(0)
    assert session.collector.on and not gc.isenabled()
    await session.close()
    assert gc.isenabled()
