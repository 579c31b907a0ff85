"""The live tok/s gauge's arithmetic: a sliding window of (time, tokens so far) samples, and tokens per bucket of
time for the sparkline, as functions over the deque and the list a lane keeps."""

from __future__ import annotations

import itertools
import math
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Final, TypeAlias

WINDOW_S: Final[float] = 1.0
"""The sliding window of the live tok/s gauge."""

DELIVERY_LAG_S: Final[float] = 0.05
"""How long after its moment an event may reach the live model: lanes that stamp their own times wake on a grid,
and a connection's reads are handed to the loop, or paced, every few milliseconds. The gauge's window ends at the
newest token while it is this recent (else this long before now), so that lag never reads as a slower stream."""

RAMP_S: Final[float] = 0.1
"""A stream younger than the window has its rate averaged over at least this long (no spike at its start)."""

BUCKET_S: Final[float] = 0.25
"""The width of one sparkline bar of the rate history."""

MAX_WINDOW_SAMPLES: Final[int] = 4096
"""The samples a window holds before each new one prunes it; below that, reading the rate prunes it."""

Window: TypeAlias = deque[tuple[float, int]]
"""(time, tokens streamed so far) of each token event, oldest first."""

_FIRST: Final[Callable[[tuple[float, int]], float]] = itemgetter(0)


def prune(window: Window, now: float) -> None:
    """Drop the samples older than the window's base at ``now``."""
    cutoff = now - WINDOW_S
    while len(window) > 1 and window[1][0] <= cutoff:
        window.popleft()


def rate(window: Window, now: float) -> float:
    """Tokens per second over the ``WINDOW_S`` up to the newest token, or up to ``DELIVERY_LAG_S`` before
    ``now`` when no token came since (over the stream's age, at least ``RAMP_S``, if less).

    The first sample of a young stream is its base: its own tokens came before any time had passed."""
    if not window:
        return 0.0
    now = max(now - DELIVERY_LAG_S, min(window[-1][0], now))  # the window's end: see DELIVERY_LAG_S
    prune(window, now)
    cutoff = now - WINDOW_S
    base_t, base_total = window[0]
    last_total = window[-1][1]
    if base_t <= cutoff:
        return max(last_total - base_total, 0) / WINDOW_S
    return max(last_total - base_total, 0) / max(now - base_t, RAMP_S)


def extend_window(window: Window, times: list[float], totals: list[int]) -> None:
    """Add a run's samples to the window, pruned as a lane prunes it sample by sample (once it holds more than
    ``MAX_WINDOW_SAMPLES``, what fell out of the window at each sample's time)."""
    window.extend(zip(times, totals, strict=True))
    size = len(window)
    if size <= MAX_WINDOW_SAMPLES:
        return
    # Pruned at the last sample's time, what is left is the same as sample by sample whenever it still holds
    # more than the limit (at the last sample the window then held more than that too, and its cut is the
    # latest): where that cut falls is found by bisection near the front, then checked (older samples may be
    # out of order).
    cutoff = times[-1] - WINDOW_S
    front = max(bisect_right(window, (cutoff, math.inf), 0, min(size - 1, 2 * len(times) + 2)) - 1, 0)
    stamps = list(map(_FIRST, itertools.islice(window, 1, front + 2)))
    if size - front > MAX_WINDOW_SAMPLES and stamps[-1] > cutoff and (not front or max(stamps[:-1]) <= cutoff):
        popleft = window.popleft
        for _ in range(front):
            popleft()
        return
    size -= len(times)  # replayed sample by sample: the samples after one are never out of its window
    for t in times:
        size += 1
        if size > MAX_WINDOW_SAMPLES:
            cutoff = t - WINDOW_S
            while size > 1 and window[1][0] <= cutoff:
                window.popleft()
                size -= 1


def add_to_history(history: list[int], times: Sequence[float], counts: Sequence[int], added: int) -> None:
    """Count a run's tokens (``counts`` at ``times``, ``added`` in all, in time order) into their buckets."""
    top = int(times[-1] / BUCKET_S)
    if top >= len(history):
        history.extend([0] * (top + 1 - len(history)))
    if int(times[0] / BUCKET_S) == top:  # in time order: every delta of the run in one bucket
        history[top] += added
    else:
        for t, count in zip(times, counts, strict=True):
            history[int(t / BUCKET_S)] += count


def history_rates(history: list[int], now: float, count: int, finished: bool) -> list[float]:
    """The last ``count`` complete buckets before ``now`` (every bucket once ``finished``), in tok/s, oldest first."""
    complete = min(int(now / BUCKET_S), len(history)) if not finished else len(history)
    return [n / BUCKET_S for n in history[max(complete - count, 0):complete]]
