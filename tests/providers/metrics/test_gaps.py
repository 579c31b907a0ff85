"""A turn's gaps beyond a run's worth go to disk as sorted runs; their percentiles stay exactly those of the list."""

from __future__ import annotations

import random
from array import array

import pytest

from tokrace.providers.metrics import gaps as gaps_module
from tokrace.providers.metrics.gaps import Gaps, percentiles_ms
from tokrace.providers.metrics.turn import percentile, turn_metrics
from tokrace.providers.model.events import Delta, Done, Request


@pytest.mark.parametrize("count", [1, 2, 999, 1000, 1001, 25_013])
def test_percentiles_over_runs_on_disk_are_exactly_those_of_the_sorted_list(
        monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.setattr(gaps_module, "RUN", 1000)
    monkeypatch.setattr(gaps_module, "READ", 7)
    rng = random.Random(count)
    values = [rng.choice([0.0, 0.001, rng.random() / 10, -1e-4]) for _ in range(count)]
    gaps = Gaps()
    for value in values[: count // 2]:
        gaps.append(value)
    gaps.extend(array("d", values[count // 2:]))
    assert len(gaps) == count and (gaps.spilled > 0) == (count >= 1000)
    ms = [v * 1000.0 for v in values]
    assert percentiles_ms(gaps) == {"p50": percentile(ms, 50), "p90": percentile(ms, 90), "p99": percentile(ms, 99),
                                    "max": max(ms)}
    assert sorted(gaps) == sorted(values)
    gaps.close()


def test_a_turn_of_many_token_events_keeps_its_gaps_on_disk_with_the_same_figures(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    t, events = 0.0, [Request(t=0.0)]
    for _ in range(5000):
        t += rng.random() / 100
        events.append(Delta(t=t, text="w", tokens=1))
    events.append(Done(t=t))
    whole = turn_metrics(events)
    monkeypatch.setattr(gaps_module, "RUN", 256)
    spilled = turn_metrics(events)
    assert spilled.itl_ms == whole.itl_ms and spilled.stalls == whole.stalls
    assert whole.itl_ms is not None


def test_gaps_stay_in_memory_when_no_temporary_file_can_be_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gaps_module, "RUN", 10)

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gaps_module.tempfile, "TemporaryFile", refuse)
    gaps = Gaps()
    gaps.extend(array("d", [float(i) for i in range(100)]))
    assert len(gaps) == 100 and gaps.spilled == 0
    assert percentiles_ms(gaps)["max"] == 99_000.0
