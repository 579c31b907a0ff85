"""The details view of a turn whose reads were paced: the ITL line shows the mean (exact: the first and last token's
stamps) and says why the gaps are not measured, never a number made of tokrace's read pace; the pace is not shown
as a provider's own timing."""

from __future__ import annotations

from tokrace.providers.metrics.turn import turn_metrics
from tokrace.providers.model.events import Delta, Done, Extra, Request
from tokrace.providers.model.tiers import TierSpec
from tokrace.tui.app.screens.details import metric_rows, wire_rows

EVENTS = [Request(t=0.0), Delta(t=0.3, text="a", tokens=1), Delta(t=0.308, text="b", tokens=1),
          Delta(t=0.316, text="c", tokens=1), Done(t=0.316)]
TIER = TierSpec(name="t", provider="openai", model="m")


def test_the_itl_line_of_a_paced_turn_shows_the_mean_and_says_why_the_gaps_are_not_measured() -> None:
    paced = [*EVENTS[:2], Extra(t=0.3, source="reads", data={"paced_ms": 8.0}), *EVENTS[2:]]
    rows = {name: (value, source) for name, value, source in metric_rows(turn_metrics(paced), TIER)}
    value, source = rows["itl_ms"]
    assert value == "mean 8.0 ms"
    assert "gaps are not measured:" in source and "every 8 ms" in source and "--exact-reads" in source
    exact = {name: (value, source) for name, value, source in metric_rows(turn_metrics(EVENTS), TIER)}
    assert exact["itl_ms"] == ("mean 8.0 · 8.0/8.0/8.0/8.0 ms",
                               "mean of the first to last token; p50/p90/p99/max of the gaps between 3 token events")
    assert {k: v for k, v in rows.items() if k != "itl_ms"} == {k: v for k, v in exact.items() if k != "itl_ms"}
    items = [item for item, _, _ in wire_rows(turn_metrics(paced), paced, TIER)]
    assert items == [item for item, _, _ in wire_rows(turn_metrics(EVENTS), EVENTS, TIER)]  # no "reads" row
