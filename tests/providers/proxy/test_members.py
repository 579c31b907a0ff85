"""A big request's few top-level members, read a piece at a time: what ``json.loads`` would give, however the body is
laid out, with the measuring's queue free between pieces."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tokrace.providers.proxy import members as members_module
from tokrace.providers.proxy.http1 import parse_head
from tokrace.providers.proxy.members import members
from tokrace.providers.proxy.meter import CallMeter, MeterQueue, request_facts
from tokrace.providers.proxy.routes import Upstream

WANTED = frozenset({"model", "metadata", "stream"})


def read(body: bytes) -> tuple[dict[str, Any] | None, int]:
    """The reader's result and how many times it yielded."""
    reading, pieces = members(body, WANTED), 0
    while True:
        try:
            next(reading)
            pieces += 1
        except StopIteration as done:
            return done.value, pieces


@pytest.fixture(autouse=True)
def piecewise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(members_module, "WHOLE_BYTES", 0)  # every body read a piece at a time


@pytest.mark.parametrize("payload", [
    {"model": "m", "stream": True, "messages": [{"role": "user", "content": "a \"quoted\" [bracket] {brace}"}] * 5},
    {"messages": [], "metadata": {"user_id": "u_session_1", "nested": [1, [2, {"model": "inner"}]]}, "model": "m"},
    {"system": "é ü 日本 \\\\ \\u0000", "model": "last", "model2": 3, "stream": False, "tools": [[], {}, None, 1.5e3]},
    {"stream": None},
    {},
])
def test_the_members_read_piecewise_are_what_json_loads_gives(payload: dict[str, Any]) -> None:
    for body in (json.dumps(payload).encode(), json.dumps(payload, indent=3).encode(),
                 json.dumps(payload, ensure_ascii=False).encode("utf-16")):
        got, _ = read(body)
        assert got == {k: v for k, v in json.loads(body).items() if k in WANTED}


def test_a_later_duplicate_member_wins_as_in_json_loads() -> None:
    assert read(b'{"model": "a", "x": [1], "model": "b"}')[0] == {"model": "b"}


@pytest.mark.parametrize("body", [b'{"model": "m",}', b'{"model": "m"} x', b'{"model" "m"}',
                                  b'{"model": "m", "a": [1 2]}', b'{"a": "unterminated', b'{"a": [1, 2}',
                                  b"\xff\xfe\xfa", b"", b"{'a': 1}"])
def test_a_body_that_is_not_json_is_none(body: bytes) -> None:
    assert read(body)[0] is None


def test_another_json_value_has_no_members() -> None:
    assert read(b' [1, {"model": "m"}] ')[0] == {} and read(b'"text"')[0] == {}


def test_a_big_array_is_read_an_element_at_a_time() -> None:
    body = json.dumps({"messages": [{"role": "user", "content": "x" * 100}] * 2_000, "model": "m"}).encode()
    got, pieces = read(body)
    assert got == {"model": "m"} and pieces >= 2_000


def test_a_big_request_opens_its_call_over_several_of_the_queues_steps_with_the_same_facts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    payload = {"model": "claude-x", "stream": True, "messages": [{"role": "user", "content": "hi " * 50}] * 300,
               "metadata": {"user_id": "user_abc_account_1_session_77"}}
    body = json.dumps(payload).encode()
    head = parse_head(b"POST /v1/messages HTTP/1.1\r\nuser-agent: claude-cli\r\n\r\n")
    opened: list[CallMeter] = []
    call = CallMeter("POST", lambda: 0.0, lambda c: opened.append(c) or (lambda e: None), lambda c: None,
                     work=MeterQueue())
    call.request(head, 0.0, Upstream.parse("http://127.0.0.1:1"))
    call.request_body(body)
    steps = 1
    while call.step("sent", 0.0, None) is False:
        steps += 1
        assert not opened  # (the call opens once its request is read)
    assert steps > 300 and opened == [call]
    expected = request_facts(head, body, False)
    assert call.facts == expected and call.facts.model == "claude-x" and call.facts.session == "session_77"
