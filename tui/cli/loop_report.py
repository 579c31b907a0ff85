"""Bench's bottleneck summary for a scenario: per lane, where the loop's time went, the model's share, the
Amdahl bound and a what-if; across lanes, measured end-to-end speed-up next to token speed-up. The cells come
from :mod:`tokrace.providers.export.tables`, which the exports share."""

from __future__ import annotations

from rich.table import Table

from tokrace.providers.export import tables
from tokrace.providers.runs.session import SessionResult

from .rich_tables import rich_table


def bottleneck_table(result: SessionResult, factor: float, scenario: str, runs: int) -> Table:
    """The table: a row per lane, a column per part of the loop (seconds and share of the loop)."""
    return rich_table(tables.bottleneck_table(result, factor, scenario, runs))


def speedup_line(result: SessionResult, factor: float) -> str | None:
    """One sentence on the gap: the fastest lane's token speed-up against its end-to-end speed-up."""
    return tables.speedup_line(result, factor)
