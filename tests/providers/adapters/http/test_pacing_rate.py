"""When a reader thread hands its socket to the paced looks: once packets keep coming faster than 500 a second over
the last reads, whatever the jitter of single gaps; never for a slow stream or a short burst."""

from __future__ import annotations

from collections import deque
from itertools import accumulate, cycle, islice

from tokrace.providers.adapters.http.stamped_stream import FAST_READ_S, PACE_AFTER, comes_fast


def stamps(gaps_ms: list[float], count: int) -> deque[float]:
    """The latest reads of a stream whose gaps repeat ``gaps_ms``, as the reader keeps them."""
    times = accumulate(islice(cycle(gaps_ms), count), lambda t, gap: t + gap / 1000.0, initial=0.0)
    return deque(times, maxlen=PACE_AFTER + 1)


def test_a_steady_fast_stream_with_jittered_gaps_is_paced() -> None:
    # 750 tok/s with every third write a millisecond late: gaps over 2 ms, 1.8 ms on average
    assert comes_fast(stamps([1.2, 1.2, 3.0], 40))


def test_a_stream_slower_than_500_packets_a_second_is_read_per_packet() -> None:
    assert not comes_fast(stamps([FAST_READ_S * 1000.0 * 1.1], 100))
    assert not comes_fast(stamps([0.1, 0.1, 0.1, 10.0], 100))  # bursts of a few packets, then a pause


def test_pacing_waits_for_enough_reads() -> None:
    assert not comes_fast(stamps([0.1], PACE_AFTER - 1))  # PACE_AFTER stamps: one gap short
    assert comes_fast(stamps([0.1], PACE_AFTER))
