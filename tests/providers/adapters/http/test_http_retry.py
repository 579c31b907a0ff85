"""Retry rules as the official SDKs have them, and the reading of providers' error bodies."""

from __future__ import annotations

import email.utils

import httpx
import pytest

from tokrace.providers.adapters.http.error_text import error_body, excerpt
from tokrace.providers.adapters.http.retry import (
    DEFAULT_MAX_RETRIES,
    backoff_s,
    retry_after_s,
    retry_delay_s,
    should_retry,
)


def test_two_retries_by_default() -> None:
    assert DEFAULT_MAX_RETRIES == 2


@pytest.mark.parametrize(("status", "retried"), [(400, False), (401, False), (403, False), (404, False),
                                                 (408, True), (409, True), (422, False), (429, True),
                                                 (500, True), (502, True), (503, True), (529, True)])
def test_which_statuses_are_retried(status: int, retried: bool) -> None:
    assert should_retry(status, httpx.Headers()) is retried


def test_x_should_retry_overrides_the_status() -> None:
    assert should_retry(400, httpx.Headers({"x-should-retry": "true"}))
    assert not should_retry(503, httpx.Headers({"x-should-retry": "false"}))


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert retry_after_s(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after_s(httpx.Headers({"retry-after": "1.5"})) == 1.5
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert retry_after_s(httpx.Headers({"retry-after": date}), now=1_000_000) == pytest.approx(30)
    assert retry_after_s(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after_s(httpx.Headers()) is None


@pytest.mark.parametrize(("asked", "expected"), [("3", 3.0), ("60", 60.0), ("61", 0.5), ("0", 0.5), ("-1", 0.5)])
def test_retry_after_is_honoured_up_to_60_seconds_else_backoff(asked: str, expected: float) -> None:
    assert retry_delay_s(httpx.Headers({"retry-after": asked}), 0, lambda n: 0.5) == expected


def test_backoff_doubles_from_half_a_second_caps_at_8_and_jitters_down_a_quarter() -> None:
    assert [backoff_s(n, lambda: 0.0) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert backoff_s(0, lambda: 1.0) == 0.375


@pytest.mark.parametrize(("raw", "expected"), [
    (b'{"error": {"message": "Invalid model", "type": "invalid_request_error", "code": null}}',
     ("invalid_request_error", "Invalid model")),
    (b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
     ("overloaded_error", "Overloaded")),
    (b'{"error": {"code": 402, "message": "Insufficient credits"}}', ("402", "Insufficient credits")),
    (b'{"object": "error", "message": "old vLLM"}', ("", "old vLLM")),
    (b'{"error": "plain words"}', ("", "plain words")),
    (b"<html>Bad Gateway</html>\n", ("", "<html>Bad Gateway</html>")),
    (b"", ("", "")),
])
def test_error_bodies_of_every_usual_shape_are_read(raw: bytes, expected: tuple[str, str]) -> None:
    assert error_body(raw) == expected


def test_excerpts_are_one_short_line() -> None:
    assert excerpt("a\nb\t c") == "a b c"
    assert len(excerpt("x" * 1000, 50)) == 50
