"""Bench's bottleneck summary for a scenario: per lane, where the loop's time went, the model's share, the
Amdahl bound and a what-if; across lanes, measured end-to-end speed-up next to token speed-up."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from providers.events import SEGMENT_KINDS
from providers.loop.metrics import Bottleneck, LoopMetrics, bottlenecks, representative
from providers.session import SessionResult

from .widgets.summary import finishes


def lane_bottlenecks(result: SessionResult, factor: float) -> list[Bottleneck]:
    """One bottleneck per lane that ran a loop, from its median run."""
    lanes: list[tuple[str, LoopMetrics]] = []
    for tier, runs in zip(result.tiers, result.metrics, strict=True):
        loop = representative(runs)
        if loop is not None:
            lanes.append((tier.name, loop))
    return bottlenecks(lanes, factor)


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def bottleneck_table(result: SessionResult, factor: float, scenario: str, runs: int) -> Table:
    """The table: a row per lane, a column per part of the loop (seconds and share of the loop)."""
    rows = lane_bottlenecks(result, factor)
    order = ["model", *SEGMENT_KINDS]
    present = sorted({name for b in rows for name, _, _ in b.parts}, key=order.index)
    title = f"where the time goes — {scenario}" + (f" (median of {runs} runs)" if runs > 1 else "")
    table = Table(title=title, title_justify="left", caption="model: all time waiting on the model API (to "
                  "the first token, thinking, streaming); Amdahl: the most any faster model could give",
                  caption_justify="left")
    table.add_column("tier", no_wrap=True)
    table.add_column("loop", justify="right", no_wrap=True)
    for name in present:
        table.add_column(name, justify="right", no_wrap=True)
    compare = len(rows) > 1
    for col in ("Amdahl", f"{factor:g}× faster model", *(["speed-up e2e | tok/s"] if compare else [])):
        table.add_column(col, justify="right", no_wrap=True)
    for b in rows:
        parts = {name: (s, share) for name, s, share in b.parts}
        cells = [f"{parts[n][0]:.1f} s {parts[n][1]:.0%}" if n in parts else "—" for n in present]
        what = f"{b.what_if.e2e_s:.1f} s −{b.what_if.sooner_pct:.0f}%"
        speedups = [f"{_x(b.e2e_speedup)} | {_x(b.token_speedup)}"] if compare else []
        table.add_row(escape(b.name), f"{b.e2e_s:.1f} s", *cells, _x(b.amdahl_max_speedup), what, *speedups,
                      style="" if b.ok else "dim")
    return table


def speedup_line(result: SessionResult, factor: float) -> str | None:
    """One sentence on the gap: the fastest lane's token speed-up against its end-to-end speed-up."""
    rows = [b for b in lane_bottlenecks(result, factor) if b.token_speedup is not None and b.e2e_speedup]
    base = min(rows, key=lambda b: b.token_speedup or 0.0, default=None)
    best = max(rows, key=lambda b: b.token_speedup or 0.0, default=None)
    if base is None or best is None or best is base:
        return None
    return (f"{best.name} streams {best.token_speedup:.1f}× faster than {base.name} but finishes the loop "
            f"{finishes(best.e2e_speedup or 0.0)}; even an infinitely fast model could make {base.name}'s loop at most "
            f"{_x(base.amdahl_max_speedup)} faster")
