"""Continuous load on the virtual clock: refill, --requests against --duration, sweeps, failures, the JSON."""

from __future__ import annotations

import itertools
import json

import pytest

from tokrace.providers.model.errors import ConfigError
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.runs.load import LoadPlan, RequestRow, TierLoad, load_report, run_load
from tokrace.providers.timing.clock import VirtualClock


def tier(name: str = "fast", ttft_ms: float = 100.0, tok_s: float = 100.0, **more: object) -> TierSpec:
    return TierSpec(name=name, provider="synthetic", model="m",
                    options={"ttft_ms": ttft_ms, "tok_s": tok_s, **more})


REQUEST = TurnRequest("Why?", max_tokens=11)
"""11 tokens: the first at 100 ms, ten more at 100 tok/s: each request lasts 0.2 s."""


async def load(tiers: list[TierSpec], plan: LoadPlan):  # type: ignore[no-untyped-def]
    clock = VirtualClock()
    return await clock.drive(run_load(tiers, REQUEST, plan, clock=clock))


async def test_each_stream_sends_its_next_request_when_its_last_ends() -> None:
    result = await load([tier()], LoadPlan((2,), requests=5))
    (point,) = result.points
    assert len(point.rows) == 5 and point.concurrency == 2
    by_stream: dict[int, list[RequestRow]] = {}
    for row in point.rows:
        by_stream.setdefault(row.stream, []).append(row)
    assert sorted(len(rows) for rows in by_stream.values()) == [2, 3]
    for rows in by_stream.values():
        assert rows[0].start_s == pytest.approx(0.0)
        for before, after in itertools.pairwise(rows):
            assert after.start_s == pytest.approx(before.end_s)  # no gap between one request and the next
    assert point.window_s == pytest.approx(0.6)  # three back to back on the busier stream


async def test_every_request_is_measured_as_a_race_lane() -> None:
    (point,) = (await load([tier()], LoadPlan((3,), requests=3))).points
    for row in point.rows:
        assert row.ok and row.ttft_s == pytest.approx(0.1) and row.e2e_s == pytest.approx(0.2)
        assert row.decode_tok_s == pytest.approx(100.0) and row.output_tokens == 11
        assert row.itl_s == pytest.approx(0.01)


async def test_aggregate_rate_is_all_tokens_over_the_window() -> None:
    (point,) = (await load([tier()], LoadPlan((4,), requests=8))).points
    assert point.window_s == pytest.approx(0.4)
    assert point.output_tokens == 88
    assert point.delivered_tok_s == pytest.approx(88 / 0.4)
    assert point.request_rate == pytest.approx(8 / 0.4)
    stats = point.percentiles()
    assert stats["ttft_s"] == pytest.approx({"p50": 0.1, "p90": 0.1, "p99": 0.1})


async def test_duration_stops_sending_and_lets_requests_under_way_finish() -> None:
    (point,) = (await load([tier()], LoadPlan((2,), duration_s=0.5))).points
    # each stream sends at 0, 0.2, 0.4 (still inside 0.5 s) and that last one ends at 0.6 and counts
    assert len(point.rows) == 6
    assert max(r.start_s for r in point.rows) < 0.5
    assert point.window_s == pytest.approx(0.6)


async def test_fewer_requests_than_streams_leaves_streams_idle() -> None:
    (point,) = (await load([tier()], LoadPlan((8,), requests=3))).points
    assert len(point.rows) == 3 and point.window_s == pytest.approx(0.2)


async def test_a_sweep_gives_a_point_per_level_and_tier() -> None:
    result = await load([tier("a"), tier("b", ttft_ms=50.0)], LoadPlan((1, 4), requests=4))
    assert [(p.tier.name, p.concurrency, len(p.rows)) for p in result.points] == [
        ("a", 1, 4), ("b", 1, 4), ("a", 4, 4), ("b", 4, 4)]
    assert result.points[0].window_s == pytest.approx(0.8)
    assert result.points[2].window_s == pytest.approx(0.2)
    assert result.points[1].percentiles()["ttft_s"]["p50"] == pytest.approx(0.05)  # type: ignore[index]


async def test_failed_requests_count_and_fail_the_run() -> None:
    result = await load([tier(fail_after_tokens=3)], LoadPlan((2,), requests=4))
    (point,) = result.points
    assert len(point.rows) == 4 and len(point.failed) == 4 and not result.all_ok
    assert point.percentiles()["ttft_s"] is None  # percentiles are of requests that succeeded
    assert point.output_tokens == 12  # tokens that arrived before the failures were delivered


async def test_a_stream_whose_request_never_reached_a_server_stops() -> None:
    bad = TierSpec(name="down", provider="openai", model="m", base_url="http://127.0.0.1:9",
                   options={"max_retries": 0})
    result = await run_load([bad], REQUEST, LoadPlan((3,), duration_s=30.0))
    (point,) = result.points
    assert len(point.rows) == 3 and all(not r.ok for r in point.rows)
    assert "cannot connect" in (point.rows[0].error or "")


def test_the_plan_wants_exactly_one_end() -> None:
    assert LoadPlan((2, 8)).requests_at(8) == 32  # given neither: four requests per stream
    with pytest.raises(ConfigError, match="one of the two"):
        LoadPlan((2,), requests=3, duration_s=1.0)
    with pytest.raises(ConfigError, match="outside"):
        LoadPlan((0,), requests=3)


async def test_replay_tiers_are_refused() -> None:
    with pytest.raises(ConfigError, match="replay a recording"):
        await run_load([TierSpec(name="r", provider="replay")], REQUEST, LoadPlan((1,), requests=1))


async def test_the_json_holds_points_with_percentiles_and_rows() -> None:
    result = await load([tier()], LoadPlan((1, 2), requests=2))
    data = json.loads(json.dumps(load_report(result)))
    assert data["mode"] == "concurrency" and data["load"] == {"concurrency": [1, 2], "requests": 2,
                                                              "requests_per_level": [2, 2], "duration_s": None}
    first = data["points"][0]
    assert first["tier"] == "fast" and first["concurrency"] == 1 and first["requests"] == 2
    assert first["delivered_tok_s"] == pytest.approx(55.0) and first["window_s"] == pytest.approx(0.4)
    assert set(first["ttft_s"]) == {"p50", "p90", "p99"} and first["itl_s"]["p50"] == pytest.approx(0.01)
    assert len(first["rows"]) == 2 and first["rows"][1]["start_s"] == pytest.approx(0.2)


def test_an_empty_point_has_no_rate() -> None:
    point = TierLoad(tier(), 4)
    assert point.delivered_tok_s is None and point.request_rate is None and point.window_s == 0.0


async def test_a_stopped_load_returns_what_ended_and_what_was_cut_short() -> None:
    import asyncio

    clock = VirtualClock()
    task = asyncio.create_task(run_load([tier()], REQUEST, LoadPlan((2, 4), requests=10), clock=clock))
    await clock.advance_to(0.5)  # two requests each stream ended (0.2 s each), the third under way
    task.cancel()
    result = await task
    assert result.stopped and not result.all_ok
    (point,) = result.points  # the second level never began
    assert [r.ok for r in point.rows] == [True] * 4 + [False] * 2
    assert all(r.error == "stopped before the end" for r in point.rows[4:])
    assert load_report(result)["stopped"] is True
