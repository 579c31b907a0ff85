"""The synthetic provider: a deterministic stream from a profile, exact on virtual time."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from conftest import kinds, race_virtually, synthetic

from tokrace.providers.adapters.synthetic import PASSAGE, Profile, pieces, schedule
from tokrace.providers.model.errors import ConfigError
from tokrace.providers.model.events import Delta, Done, Error, Event, Headers, Request, Usage, event_to_dict


def lane_events(max_tokens: int = 50, **profile: Any) -> list[Event]:
    return race_virtually([synthetic(**profile)], max_tokens=max_tokens)[0].events


def as_json_lines(events: list[Event]) -> bytes:
    return "".join(json.dumps(event_to_dict(e)) + "\n" for e in events).encode()


def deltas(events: list[Event]) -> list[Delta]:
    return [e for e in events if isinstance(e, Delta)]


def test_same_profile_and_seed_give_byte_identical_event_json() -> None:
    profile = {"ttft_ms": 300, "tok_s": 120, "jitter": 0.3, "seed": 42, "tokens_per_event": 2}
    assert as_json_lines(lane_events(200, **profile)) == as_json_lines(lane_events(200, **profile))


def test_another_seed_gives_another_stream_when_there_is_jitter() -> None:
    a = lane_events(100, tok_s=120, jitter=0.3, seed=1)
    b = lane_events(100, tok_s=120, jitter=0.3, seed=2)
    assert [e.t for e in deltas(a)] != [e.t for e in deltas(b)]
    assert [e.text for e in deltas(a)] == [e.text for e in deltas(b)]


def test_a_stream_is_request_headers_deltas_usage_done() -> None:
    events = lane_events(5, ttft_ms=100, tok_s=50)
    assert kinds(events) == ["request", "headers"] + ["delta"] * 5 + ["usage", "done"]
    assert isinstance(events[0], Request) and events[0].t == 0.0
    assert isinstance(events[1], Headers) and events[1].t <= events[2].t
    assert events[-1] == Done(t=events[-2].t, finish_reason="length")


def test_without_jitter_tokens_arrive_exactly_on_schedule() -> None:
    ds = deltas(lane_events(600, ttft_ms=200, tok_s=750, jitter=0))
    assert ds[0].t == 0.2
    assert [d.t for d in ds] == [0.2 + i / 750 for i in range(600)]


def test_jitter_keeps_every_gap_within_its_relative_bound() -> None:
    ds = deltas(lane_events(300, ttft_ms=400, tok_s=100, jitter=0.2, seed=9))
    assert 0.4 * 0.8 <= ds[0].t <= 0.4 * 1.2
    gaps = [b.t - a.t for a, b in itertools.pairwise(ds)]
    assert all(0.01 * 0.8 - 1e-12 <= g <= 0.01 * 1.2 + 1e-12 for g in gaps)
    assert max(gaps) - min(gaps) > 0.003
    assert sum(gaps) / len(gaps) == pytest.approx(0.01, rel=0.05)


def test_several_tokens_per_event_are_sent_together_and_counted() -> None:
    ds = deltas(lane_events(10, tok_s=100, tokens_per_event=3))
    assert [d.tokens for d in ds] == [3, 3, 3, 1]
    assert [len(pieces(d.text)) for d in ds] == [3, 3, 3, 1]
    assert [round(b.t - a.t, 9) for a, b in itertools.pairwise(ds)] == [0.03, 0.03, 0.01]


def test_thinking_phase_streams_reasoning_at_its_own_rate_before_the_answer() -> None:
    events = lane_events(40, ttft_ms=100, tok_s=100, thinking_tokens=10, thinking_tok_s=500)
    ds = deltas(events)
    assert [d.channel for d in ds] == ["reasoning"] * 10 + ["content"] * 30
    think_gaps = {round(b.t - a.t, 9) for a, b in itertools.pairwise(ds[:10])}
    answer_gaps = {round(b.t - a.t, 9) for a, b in itertools.pairwise(ds[10:])}
    assert think_gaps == {0.002} and answer_gaps == {0.01}
    usage = next(e for e in events if isinstance(e, Usage))
    assert (usage.output, usage.reasoning) == (40, 10)


def test_built_in_passage_is_prose_with_sentence_ends_repeated_to_the_token_budget() -> None:
    ds = deltas(lane_events(2 * len(pieces(PASSAGE)) + 5, tok_s=1000))
    text = "".join(d.text for d in ds)
    assert text.startswith(PASSAGE + PASSAGE)
    assert text.count(". ") > 10


def test_given_text_is_streamed_once_and_ends_with_stop() -> None:
    events = lane_events(100, tok_s=100, text="Short answer. Done.")
    assert "".join(d.text for d in deltas(events)) == "Short answer. Done."
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "stop"


def test_usage_counts_the_prompt_as_input_and_every_token_as_output() -> None:
    events = race_virtually([synthetic(tok_s=100)], max_tokens=7, prompt="one two three")[0].events
    usage = next(e for e in events if isinstance(e, Usage))
    assert (usage.input, usage.output) == (3, 7)


def test_fail_after_tokens_ends_the_lane_with_an_error() -> None:
    events = lane_events(50, tok_s=100, fail_after_tokens=5)
    assert kinds(events)[-2:] == ["delta", "error"]
    assert len(deltas(events)) == 5
    error = events[-1]
    assert isinstance(error, Error) and "fail_after_tokens" in error.message


def test_schedule_is_a_pure_function_of_profile_seed_and_turn() -> None:
    profile = Profile(tok_s=80, jitter=0.25, seed=3)
    assert list(schedule(profile, 50)) == list(schedule(profile, 50))
    assert list(schedule(profile, 50, turn=1)) != list(schedule(profile, 50, turn=0))


@pytest.mark.parametrize(("options", "key"), [
    ({"tok_s": 0}, "tok_s"),
    ({"ttft_ms": -1}, "ttft_ms"),
    ({"jitter": 1.0}, "jitter"),
    ({"jitter": -0.1}, "jitter"),
    ({"tokens_per_event": 0}, "tokens_per_event"),
    ({"thinking_tokens": -5}, "thinking_tokens"),
    ({"thinking_tok_s": 0}, "thinking_tok_s"),
    ({"ttfb_ms": -3}, "ttfb_ms"),
    ({"fail_after_tokens": -1}, "fail_after_tokens"),
    ({"text": "   "}, "text"),
])
def test_a_profile_out_of_range_is_a_config_error_naming_the_key(options: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=key) as caught:
        Profile.from_options(options)
    assert caught.value.key == key
