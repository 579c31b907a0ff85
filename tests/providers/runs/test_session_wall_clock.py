"""Each run of bench's JSON carries its wall-clock start (``started_at``, ISO 8601 in UTC to the microsecond), so
its figures can be lined up with a server's log; a loop's turns carry their own."""

from __future__ import annotations

import datetime as dt
import re
import time

import pytest
from serving import serve_in_thread, tier

from tokrace.providers.loop.scenario_file import load_scenario
from tokrace.providers.metrics.turn import utc_iso
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.runs.session import report, run_session

ISO_UTC_US = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def parsed(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_utc_iso_is_utc_to_the_microsecond() -> None:
    assert utc_iso(0.0) == "1970-01-01T00:00:00.000000Z"
    assert utc_iso(1_700_000_000.25) == "2023-11-14T22:13:20.250000Z"
    assert utc_iso(None) is None


async def test_every_run_carries_its_wall_clock_start_in_order() -> None:
    with serve_in_thread() as server:
        spec = tier(server, "openai")
        before = time.time()
        result = await run_session([spec], TurnRequest("hi", max_tokens=5), runs=3)
        after = time.time()
    runs = report(result)["tiers"][0]["runs"]
    starts = [run["started_at"] for run in runs]
    assert all(ISO_UTC_US.match(s) for s in starts), starts
    times = [parsed(s) for s in starts]
    assert before <= times[0] <= times[1] <= times[2] <= after
    for lanes, m, started in zip(result.runs, result.metrics[0], times, strict=True):
        origin = lanes[0].wall_origin  # the lane's time 0 on the wall clock, plus the request's start on the lane's
        assert origin is not None
        assert started == pytest.approx(origin + m.start, abs=2e-6)


async def test_a_loops_turns_each_carry_their_start() -> None:
    from tokrace.providers.config.demo import demo_tiers

    before = time.time()
    result = await run_session(demo_tiers()[:1], TurnRequest("hi"), fast_forward=True,
                               scenario=load_scenario("incident"))
    run = report(result)["tiers"][0]["runs"][0]
    turns = [parsed(t["started_at"]) for t in run["turns"]]
    assert parsed(run["started_at"]) >= before
    assert turns == sorted(turns) and turns[-1] > turns[0]
