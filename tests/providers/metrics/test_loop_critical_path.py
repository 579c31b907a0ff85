"""A trace lane's loop metrics follow the critical path its events carry (docs/design.md §6, §12), not what
plays at each instant."""

from __future__ import annotations

import pytest

from tokrace.providers.metrics.loop import bottlenecks, loop_metrics, path_breakdown
from tokrace.providers.model.events import Done, Event, Request, Segment, Usage, loop_end, path_piece


def test_the_path_is_counted_clipped_and_a_stretch_it_misses_goes_to_the_kind_before() -> None:
    path = [("model", 0.0, 2.0), ("human", 2.0, 10.0), ("model", 11.0, 12.0)]
    assert path_breakdown(path, 0.0, 12.0) == {"model": 3.0, "human": 9.0}
    assert path_breakdown(path, 0.0, 5.0) == {"model": 2.0, "human": 3.0}
    assert path_breakdown(path, 0.0, 20.0) == {"model": 11.0, "human": 9.0}
    assert path_breakdown([], 0.0, 5.0) == {}


def lane(with_path: bool) -> list[Event]:
    # a sub-agent's model call (2-8 s) beside a person (2-10 s): by precedence 6 s of the person go to the model
    head = [path_piece(0.0, "model", 0.0, 2.0), path_piece(0.0, "human", 2.0, 10.0),
            path_piece(0.0, "model", 10.0, 11.0)] if with_path else []
    return [*head, Request(t=0.0, turn=1), Usage(t=2.0, output=5), Done(t=2.0),
            Segment(t=2.0, seg="model", start=2.0, end=8.0, label="sub-agent", chain="sub"),
            Segment(t=2.0, seg="human", start=2.0, end=10.0),
            Request(t=10.0, turn=2), Usage(t=11.0, output=5), Done(t=11.0),
            loop_end(11.0, "t trace", 2, **({"amdahl_max_speedup": 1.25} if with_path else {}))]


def test_a_lane_with_a_critical_path_breaks_down_along_it_with_the_measured_bound() -> None:
    m = loop_metrics(lane(True))
    assert m.e2e_s == 11.0
    assert m.breakdown == {"model": 3.0, "human": 8.0}
    assert m.model_s == 3.0 and m.model_share == pytest.approx(3 / 11)
    assert m.amdahl_max_speedup == 1.25
    parts = {k: s for k, s, _ in bottlenecks([("t", m)])[0].parts}
    assert parts == {"model": 3.0, "human": 8.0}


def test_without_a_path_the_lane_counts_what_plays_by_precedence() -> None:
    m = loop_metrics(lane(False))
    parts = {k: s for k, s, _ in bottlenecks([("t", m)])[0].parts}
    assert parts == {"model": 9.0, "human": 2.0}
