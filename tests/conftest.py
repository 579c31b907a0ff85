"""Shared fixtures: every test runs with its own user dirs (never the real ones) and builds lanes on virtual time."""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tokrace.providers.model.events import Event
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import Price, TierSpec
from tokrace.providers.race.race import LaneRun, Listener, Race
from tokrace.providers.timing.clock import VirtualClock


@pytest.fixture(autouse=True)
def isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point platformdirs' data and config dirs into a temporary folder, so no test touches the real ones."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    return home


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from an empty folder, so no ./tokrace.toml is found by accident."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def synthetic(name: str = "lane", *, model: str = "", price: Price | None = None, max_tokens: int | None = None,
              **profile: Any) -> TierSpec:
    """A synthetic tier with the given profile options."""
    return TierSpec(name=name, provider="synthetic", model=model, price=price, max_tokens=max_tokens,
                    options=profile)


def race_virtually(tiers: Sequence[TierSpec], max_tokens: int = 50, prompt: str = "Why?",
                   listeners: Sequence[Listener] = ()) -> list[LaneRun]:
    """Race the tiers once on a fresh virtual clock and return every lane's events."""
    import asyncio

    async def go() -> list[LaneRun]:
        clock = VirtualClock()
        race = Race(tiers, TurnRequest(prompt=prompt, max_tokens=max_tokens), clock, listeners)
        return await clock.drive(race.run())

    return asyncio.run(go())


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str], Path]:
    """Write a config file into the test's folder and return its path."""
    def write(text: str, name: str = "tokrace.toml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


def kinds(events: Sequence[Event]) -> list[str]:
    """The kinds of a sequence of events, in order."""
    return [e.kind for e in events]


class Timeline:
    """The real clock's time, moved by the test instead of the world: each reading of ``perf_counter`` a microsecond
    after the one before (the loop runs on meanwhile), and a timed sleep on the event loop's timer passes its whole
    time at once, then gives the loop back once, as the timer's wake-up does."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []
        """Every sleep on the event loop's timer, as asked (0: a yield to the loop)."""

    def perf_counter(self) -> float:
        self.now += 1e-6
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += max(delay, 0.0)
        await asyncio.sleep(0)


@pytest.fixture
def timeline(monkeypatch: pytest.MonkeyPatch) -> Timeline:
    """The real clock (``RealClock``) on a :class:`Timeline`: what it reads and how long it waits on the event loop's
    timer move only as the test runs, never with the wall clock."""
    from tokrace.providers.timing import clock as clock_module

    line = Timeline()
    read = types.SimpleNamespace(**{**vars(time), "perf_counter": line.perf_counter})
    monkeypatch.setattr(clock_module, "time", read)
    monkeypatch.setattr(clock_module, "asyncio", types.SimpleNamespace(**{**vars(asyncio), "sleep": line.sleep}))
    return line
