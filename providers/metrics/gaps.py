"""A turn's gaps between token events, kept for their exact percentiles in bounded memory: in memory up to a run's
worth, beyond that as sorted runs in a temporary file, merged once when the percentiles are asked for."""

from __future__ import annotations

import heapq
import tempfile
from array import array
from collections.abc import Iterator
from typing import IO, Final

RUN: Final[int] = 1 << 18
"""Gaps kept in memory (2 MB) before they are sorted and written out as one run."""

READ: Final[int] = 8192
"""Gaps read back from a run at a time while merging (64 KB per run: a ten-million-event turn has 38 runs)."""


class Gaps:
    """Appended like an ``array('d')``; :meth:`at_ranks` gives the values at given ranks of their sorted order,
    exactly. A turn of ten million token events holds a few MB, not 80 (an array) or 320 (a list to sort).
    Should no temporary file be made or written, the gaps stay in memory: nothing is lost."""

    __slots__ = ("_buf", "_file", "_runs", "_spills", "spilled")

    def __init__(self) -> None:
        self._buf = array("d")
        self._file: IO[bytes] | None = None
        self._runs: list[tuple[int, int]] = []
        """(offset, count) of each sorted run written."""
        self._spills = True
        self.spilled = 0
        """Gaps written out in runs."""

    def __len__(self) -> int:
        return self.spilled + len(self._buf)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[float]:
        """Every gap (in no particular order once runs were written)."""
        for offset, count in self._runs:
            yield from self._run(offset, count)
        yield from self._buf

    def append(self, gap: float) -> None:
        self._buf.append(gap)
        if len(self._buf) >= RUN and self._spills:
            self._spill()

    def extend(self, gaps: array[float]) -> None:
        self._buf.extend(gaps)
        if len(self._buf) >= RUN and self._spills:
            self._spill()

    def _spill(self) -> None:
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="tokrace-gaps-")  # noqa: SIM115  (closed in close())
            ordered = array("d", sorted(self._buf))
            offset = self._file.seek(0, 2)
            self._file.write(ordered.tobytes())
        except OSError:  # no temporary folder, a full disk: the rest stays in memory
            self._spills = False
            return
        self._runs.append((offset, len(ordered)))
        self.spilled += len(ordered)
        self._buf = array("d")

    def _run(self, offset: int, count: int) -> Iterator[float]:
        assert self._file is not None
        done = 0
        while done < count:
            take = min(READ, count - done)
            self._file.seek(offset + 8 * done)
            block = array("d")
            block.frombytes(self._file.read(8 * take))
            done += take
            yield from block

    def at_ranks(self, ranks: list[int]) -> dict[int, float]:
        """The values at ``ranks`` (0-based, each below ``len(self)``) of the gaps in ascending order."""
        wanted = sorted(set(ranks))
        if not self._runs:
            ordered = sorted(self._buf)
            return {rank: ordered[rank] for rank in wanted}
        streams = [self._run(offset, count) for offset, count in self._runs]
        merged = heapq.merge(*streams, sorted(self._buf))
        out: dict[int, float] = {}
        at = 0
        for rank in wanted:
            for value in merged:
                if at == rank:
                    out[rank] = value
                    at += 1
                    break
                at += 1
        return out

    def close(self) -> None:
        """Let go of the runs' file."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._runs = []


def percentiles_ms(gaps: Gaps, qs: tuple[int, ...] = (50, 90, 99)) -> dict[str, float]:
    """``{"p50": ..., "p90": ..., "p99": ..., "max": ...}`` of the gaps in milliseconds, as
    ``percentile(sorted(g * 1000 for g in gaps), q)`` gives them (scaling keeps the order: the same numbers)."""
    n = len(gaps)
    ranks: list[int] = [n - 1]
    for q in qs:
        pos = (n - 1) * q / 100.0
        ranks += [int(pos), min(int(pos) + 1, n - 1)]
    values = {rank: value * 1000.0 for rank, value in gaps.at_ranks(ranks).items()}
    out: dict[str, float] = {}
    for q in qs:
        pos = (n - 1) * q / 100.0
        lo = int(pos)
        hi = min(lo + 1, n - 1)
        out[f"p{q}"] = values[lo] + (values[hi] - values[lo]) * (pos - lo)
    out["max"] = values[n - 1]
    return out
