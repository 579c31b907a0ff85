"""While the app runs, the collector looks at young objects less often (the lanes make one per token, and the few
lines a frame draws would set off a look almost every frame); once it ends, the collector is as it was."""

from __future__ import annotations

import gc

from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.timing.clock import VirtualClock
from tokrace.tui.app.app import YOUNG_OBJECTS, build_app


async def test_the_app_raises_the_young_threshold_while_it_runs_and_restores_the_collector_after() -> None:
    before = gc.get_threshold()
    assert before[0] < YOUNG_OBJECTS
    clock = VirtualClock()
    app = build_app(demo_tiers(), TurnRequest("Why?", 20), clock_factory=lambda: clock, animate=False,
                    freeze_gc=True)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(20):
            await pilot.pause()
            if gc.get_threshold() != before:
                break
        assert gc.get_threshold() == (YOUNG_OBJECTS, *before[1:])
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


async def test_an_app_that_leaves_the_collector_alone_does() -> None:
    before = gc.get_threshold()
    clock = VirtualClock()
    app = build_app(demo_tiers(), TurnRequest("Why?", 20), clock_factory=lambda: clock, animate=False,
                    freeze_gc=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert gc.get_threshold() == before
    assert gc.get_threshold() == before
