"""Deltas folded into a live lane a run at a time (``LiveLane.on_deltas``, a synthetic lane's wake-up) leave the
lane exactly as folding them one at a time does: every figure the screen reads, at any moment."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tokrace.providers.model.events import Delta, Done, Event, Request, Usage
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.live import LiveLane
from tokrace.providers.race.rate import MAX_WINDOW_SAMPLES

TIER = TierSpec(name="s", provider="synthetic", model="m")


def _stream(rng: random.Random, count: int, rate: float, stalls: bool, channels: bool, counted: bool,
            disorder: bool) -> list[Delta]:
    """Deltas of a made-up stream: ``rate`` a second, with long gaps, channel changes, deltas without a count,
    empty texts and times out of order where asked."""
    out: list[Delta] = []
    t = 0.05
    channel = "reasoning" if channels else "content"
    for i in range(count):
        t += rng.expovariate(rate)
        if stalls and rng.random() < 0.002:
            t += rng.uniform(0.3, 2.0)
        if channels and rng.random() < 0.01:
            channel = "content" if channel == "reasoning" else "reasoning"
        stamp = t - rng.uniform(0.0, 0.01) if disorder and rng.random() < 0.01 else t
        text = "" if disorder and rng.random() < 0.005 else rng.choice([" the", " quick", " fox", ",", "\n"])
        tokens = None if not counted and rng.random() < 0.5 else rng.randint(1, 3)
        out.append(Delta(stamp, text, channel, tokens, 1 if tokens is not None or i % 7 else 2))  # type: ignore[arg-type]
    return out


def _runs(rng: random.Random, deltas: list[Delta]) -> list[list[Delta]]:
    out, at = [], 0
    while at < len(deltas):
        size = rng.choice([1, 2, 3, 50, 190, 400])
        out.append(deltas[at:at + size])
        at += size
    return out


def _joined(lane: LiveLane, keep: int = 32_768) -> list[tuple[str, str]]:
    """The lane's last ``keep`` characters as runs of one channel (how much more it keeps depends on how its text
    came in pieces)."""
    out: list[tuple[str, str]] = []
    for channel, text in lane.pieces:
        if out and out[-1][0] == channel:
            out[-1] = (channel, out[-1][1] + text)
        else:
            out.append((channel, text))
    tail: list[tuple[str, str]] = []
    for channel, text in reversed(out):
        if keep <= 0:
            break
        tail.append((channel, text[-keep:]))
        keep -= len(text)
    return tail[::-1]


def _looks(lane: LiveLane, moments: list[float]) -> Any:
    return (lane.tokens, lane.history, list(lane._window), _joined(lane), lane.version, lane.last_t, lane.first_t,
            lane.ttft, lane.state, lane.turns, lane._sources, lane._stream_total, lane.decode_rate(),
            [lane.rate(now) for now in moments], [lane.history_rates(now, 40) for now in moments],
            [lane.segments(now) for now in moments])


CASES = [  # (count, rate, stalls, channels, counted, disorder)
    (3000, 12_000.0, False, False, True, False),
    (30_000, 20_000.0, False, False, True, False),  # the window holds more than its sample limit
    (9000, 4500.0, False, False, True, False),  # around the limit: pruned at some samples of a run only
    (6000, 3000.0, True, True, True, False),
    (4000, 2000.0, True, True, False, True),
]


@pytest.mark.parametrize("case", CASES)
def test_a_run_folded_at_once_leaves_the_lane_as_one_delta_at_a_time(case: tuple[Any, ...]) -> None:
    rng = random.Random(hash(case) & 0xFFFF)
    deltas = _stream(rng, *case)
    start: list[Event] = [Request(t=0.0, turn=0, model="m"), deltas[0]]
    end: list[Event] = [Usage(t=deltas[-1].t, output=5), Done(t=deltas[-1].t, finish_reason="stop")]
    one, many = LiveLane(TIER), LiveLane(TIER)
    for event in [*start, *deltas[1:], *end]:
        one.on_event(event)
    for event in start:
        many.on_event(event)
    for run in _runs(rng, deltas[1:]):
        many.on_deltas(run)
    for event in end:
        many.on_event(event)
    moments = [deltas[len(deltas) * k // 5].t + lag for k in range(5) for lag in (0.0, 0.03, 0.8)]
    assert _looks(many, moments) == _looks(one, moments)


def test_a_plain_run_is_folded_without_a_step_per_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthetic lane's wake-up (text, counts, one channel, in order) takes the run's path, not the per-delta one;
    a run that is not plain (a delta without a count) takes the per-delta one."""
    lane = LiveLane(TIER)
    lane.on_event(Request(t=0.0, turn=0, model="m"))
    lane.on_event(Delta(0.05, "Hi", "content", 1))
    steps: list[float] = []
    per_delta = lane._on_delta

    def noted(delta: Delta, t: float, piece: bool = True) -> None:
        steps.append(t)
        per_delta(delta, t, piece)

    monkeypatch.setattr(lane, "_on_delta", noted)
    lane.on_deltas([Delta(0.06 + i / 12_000, " word", "content", 1) for i in range(200)])
    assert steps == [] and lane.tokens == 201 and len(lane._window) == 201
    lane.on_deltas([Delta(0.1, " a", "content", 1), Delta(0.1, " b", "content", None)])
    assert len(steps) == 2


def test_the_window_replay_prunes_as_each_sample_would() -> None:
    """Past the sample limit, the window drops what is older than a second before each sample, as it comes."""
    one, many = LiveLane(TIER), LiveLane(TIER)
    deltas = [Delta(0.01 + i / 6000, "x ", "content", 1) for i in range(MAX_WINDOW_SAMPLES * 2)]
    for lane in (one, many):
        lane.on_event(Request(t=0.0, turn=0, model="m"))
        lane.on_event(deltas[0])
    for delta in deltas[1:]:
        one.on_event(delta)
    for at in range(1, len(deltas), 997):
        many.on_deltas(deltas[at:at + 997])
    assert list(many._window) == list(one._window)
    assert len(one._window) < MAX_WINDOW_SAMPLES * 2
