"""A turn whose reads were paced (its ``reads`` extra event): inter-token gaps not measured (``itl_ms`` holds only
the mean, with ``reads_paced_ms``), everything else as measured; recordings and replays say the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokrace.providers.metrics.loop import loop_metrics
from tokrace.providers.metrics.turn import turn_metrics
from tokrace.providers.model.events import Delta, Done, Event, Extra, Request
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.recording import Recorder, read_recording

PACED = Extra(t=0.31, source="reads", data={"paced_ms": 8.0})


def turn(*extra: Event, start: float = 0.0) -> list[Event]:
    return [Request(t=start), Delta(t=start + 0.3, text="a", tokens=1), *extra,
            Delta(t=start + 0.308, text="b", tokens=1), Delta(t=start + 0.308, text="c", tokens=1),
            Delta(t=start + 0.316, text="d", tokens=1), Done(t=start + 0.316)]


MEAN_MS = 16.0 / 3  # (last − first) ÷ (tokens − 1): 0.316 − 0.3 over three gaps


def test_a_paced_turn_reports_only_the_mean_inter_token_gap_and_why() -> None:
    exact, paced = turn_metrics(turn()), turn_metrics(turn(PACED))
    assert exact.itl_ms is not None and exact.reads_paced_ms is None
    assert set(exact.itl_ms) == {"mean", "p50", "p90", "p99", "max"}
    assert paced.itl_ms == {"mean": pytest.approx(MEAN_MS)} and paced.reads_paced_ms == 8.0
    assert exact.itl_ms["mean"] == pytest.approx(MEAN_MS)
    for name in ("ttft_s", "e2e_s", "decode_tok_s", "e2e_tok_s", "output_tokens", "token_events", "stalls"):
        assert getattr(paced, name) == getattr(exact, name), name
    out = paced.to_json()
    assert out["itl_ms"] == {"mean": 5.333} and out["reads_paced_ms"] == 8.0
    assert out["provider_timing"] == {}  # tokrace's own fact, not a provider's timing
    assert exact.to_json()["reads_paced_ms"] is None


def test_a_malformed_reads_event_is_not_a_reason() -> None:
    for data in ({}, {"paced_ms": "8"}, {"paced_ms": True}, {"paced_ms": 0}):
        m = turn_metrics(turn(Extra(t=0.31, source="reads", data=data)))
        assert m.itl_ms is not None and m.reads_paced_ms is None


def test_a_loop_with_one_paced_turn_reports_no_inter_token_gaps() -> None:
    exact = loop_metrics([*turn(), *turn(start=1.0)])
    assert exact.itl_ms is not None and exact.reads_paced_ms is None
    loop = loop_metrics([*turn(), *turn(PACED, start=1.0)])
    assert loop.itl_ms == {"mean": pytest.approx(MEAN_MS)} and loop.reads_paced_ms == 8.0
    assert loop.turns[0].itl_ms is not None and loop.turns[1].itl_ms == {"mean": pytest.approx(MEAN_MS)}


def test_a_loops_mean_inter_token_gap_weighs_every_turns_gaps() -> None:
    short = [Request(t=2.0), Delta(t=2.1, text="x", tokens=1), Delta(t=2.2, text="y", tokens=1), Done(t=2.2)]
    loop = loop_metrics([*turn(), *short])
    assert loop.itl_ms is not None
    assert loop.itl_ms["mean"] == pytest.approx((16.0 + 100.0) / 4)  # four gaps over both turns' spans


def test_a_recording_and_its_replay_say_the_same(tmp_path: Path) -> None:
    path = tmp_path / "race.jsonl"
    recorder = Recorder(path, "hi", [TierSpec(name="t", provider="openai", model="m")])
    for event in turn(PACED):
        recorder(0, event)
    recorder.close()
    replayed = turn_metrics(read_recording(path).lane_events(0))
    assert replayed.itl_ms == {"mean": pytest.approx(MEAN_MS)} and replayed.reads_paced_ms == 8.0
    assert replayed.to_json() == turn_metrics(turn(PACED)).to_json()
