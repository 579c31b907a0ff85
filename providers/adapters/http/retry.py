"""When a failed request is tried again, and after how long: the official SDKs' rules."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping
from typing import Final

DEFAULT_MAX_RETRIES: Final[int] = 2
MAX_RETRY_AFTER_S: Final[float] = 60.0
"""A ``retry-after`` up to this is waited as asked; longer or missing, the SDKs' backoff is used instead."""

RETRY_STATUSES: Final[frozenset[int]] = frozenset({408, 409, 429})
"""Retried before any byte of the stream, like the SDKs; every status from 500 up is retried too."""


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return float(raw_ms) / 1000.0
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - (time.time() if now is None else now)


def backoff_s(retries: int, rng: Callable[[], float] = random.random) -> float:
    """The SDKs' backoff: 0.5 s doubling per retry already made, at most 8 s, minus up to 25 % jitter."""
    return min(0.5 * 2.0**retries, 8.0) * (1.0 - 0.25 * rng())


def retry_delay_s(headers: Mapping[str, str], retries: int,
                  backoff: Callable[[int], float] = backoff_s) -> float:
    """How long to wait before the next attempt: ``retry-after`` when it is in (0, 60] s, else the backoff."""
    asked = retry_after_s(headers)
    if asked is not None and 0 < asked <= MAX_RETRY_AFTER_S:
        return asked
    return backoff(retries)


def should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """Whether an HTTP error is worth another attempt (``x-should-retry`` overrides the status rule)."""
    forced = headers.get("x-should-retry")
    if forced == "true":
        return True
    if forced == "false":
        return False
    return status in RETRY_STATUSES or status >= 500
