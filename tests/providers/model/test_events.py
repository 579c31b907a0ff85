"""The event vocabulary: one flat JSON object per event, and back."""

from __future__ import annotations

import json

import pytest

from tokrace.providers.model.events import (
    EVENT_TYPES,
    Delta,
    Done,
    Error,
    Event,
    EventFormatError,
    Extra,
    Headers,
    Request,
    Segment,
    ToolCall,
    Usage,
    event_from_dict,
    event_to_dict,
    is_token,
)

ONE_OF_EACH: list[Event] = [
    Request(t=0.0, turn=2, model="gpt-5.6-sol", endpoint="https://example.test/v1/responses"),
    Headers(t=0.05, status=200, request_id="req_1", service_tier="priority"),
    Delta(t=0.2, text="Hello", channel="content", tokens=1),
    Delta(t=0.21, text="hmm", channel="reasoning"),
    Delta(t=0.22, text='{"path": "a.py"}', channel="tool_args", tokens=6),
    Usage(t=0.3, input=12, output=40, reasoning=8, cached=4),
    Segment(t=0.3, seg="tool", start=0.3, end=1.3, label="pytest"),
    ToolCall(t=0.3, id="call_1", name="read_file", arguments='{"path": "a.py"}'),
    Done(t=0.4, finish_reason="length"),
    Error(t=0.5, error="http", message="HTTP 429: slow down", status=429, retry_after=1.5),
    Extra(t=0.6, source="x_groq", data={"usage": {"queue_time": 0.01}}),
]


def test_every_kind_of_event_has_an_example_here() -> None:
    assert {e.kind for e in ONE_OF_EACH} == set(EVENT_TYPES)


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: e.kind)
def test_event_survives_a_json_round_trip(event: Event) -> None:
    line = json.dumps(event_to_dict(event))
    assert event_from_dict(json.loads(line)) == event


def test_event_json_is_flat_with_kind_first_and_no_null_fields() -> None:
    data = event_to_dict(Delta(t=1.0, text="x"))
    assert next(iter(data)) == "kind"
    assert data == {"kind": "delta", "t": 1.0, "text": "x", "channel": "content"}


def test_unknown_keys_are_ignored_so_newer_minor_versions_still_load() -> None:
    assert event_from_dict({"kind": "done", "t": 1.0, "finish_reason": "stop", "new_field": 3}) == Done(t=1.0)


def test_unknown_event_kind_is_refused() -> None:
    with pytest.raises(EventFormatError, match="unknown event kind 'telepathy'"):
        event_from_dict({"kind": "telepathy", "t": 0.0})


def test_event_missing_a_required_field_is_refused() -> None:
    with pytest.raises(EventFormatError, match="bad delta event"):
        event_from_dict({"kind": "delta", "t": 0.0})


def test_events_are_immutable() -> None:
    event = Delta(t=0.0, text="a")
    with pytest.raises(AttributeError):
        event.text = "b"  # type: ignore[misc]


@pytest.mark.parametrize(("event", "expected"), [
    (Delta(t=0.0, text="a"), True),
    (Delta(t=0.0, text=" ", channel="content"), True),
    (Delta(t=0.0, text="think", channel="reasoning"), True),
    (Delta(t=0.0, text="{", channel="tool_args"), True),
    (Delta(t=0.0, text=""), False),
    (Headers(t=0.0), False),
    (Usage(t=0.0, output=3), False),
])
def test_only_a_delta_with_text_is_a_token(event: Event, expected: bool) -> None:
    assert is_token(event) is expected


def test_every_field_of_every_event_has_a_checked_type() -> None:
    """A field the file checks do not know would make every event carrying it unreadable (a sub-agent's chain)."""
    from dataclasses import fields as dc_fields

    from tokrace.providers.model.events import _FIELD_TYPES, EVENT_TYPES

    for cls in EVENT_TYPES.values():
        for f in dc_fields(cls):
            assert f.name == "kind" or f.name in _FIELD_TYPES, f"{cls.__name__}.{f.name}"
