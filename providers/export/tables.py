"""The bench's tables and sentences as plain cells: what ``tokrace bench`` prints and what the exports write.

One code for every place a race's results are shown, so the terminal table, the Markdown, the HTML and the race
screen's summary line can never disagree: the terminal adds colour to these cells, an export adds its own markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from ..metrics.loop import WHAT_IF_FACTOR, Bottleneck, LoopMetrics, WhatIf, bottlenecks, representative
from ..metrics.turn import TurnMetrics, percentile
from ..model.events import SEGMENT_KINDS
from ..model.printable import one_line
from ..model.tiers import reference_name
from ..model.units import duration, percent
from ..race.live import SOURCE_MARK
from ..race.summary import RaceSummary
from ..runs.session import SessionResult

TIE_S: Final[float] = 0.005
"""Lanes that finished closer together than this are shown as a tie (their lead would print as 0.00 s)."""

BOTTLENECK_CAPTION: Final[str] = ("model: all time waiting on the model API (to the first token, thinking, "
                                  "streaming); Amdahl: the most any faster model could give")


@dataclass(frozen=True, slots=True)
class Column:
    """A column's heading and whether its numbers align right."""

    name: str
    right: bool = False


@dataclass(slots=True)
class Row:
    """One row of plain cells; ``strong`` marks the race's fastest lane, ``dim`` a lane that failed."""

    cells: list[str]
    strong: bool = False
    dim: bool = False
    failed: int = 0
    """Runs of this tier that failed (the results table's last cell then says how many, and why)."""
    reason: str = ""
    """The first failure's message."""

    def __post_init__(self) -> None:  # a name or a server's message is shown: one safe line, never a command
        self.cells = [one_line(cell) for cell in self.cells]
        self.reason = one_line(self.reason)


@dataclass(slots=True)
class Table:
    """A titled table of plain cells."""

    title: str
    columns: list[Column]
    rows: list[Row] = field(default_factory=list)
    caption: str = ""


def fmt(x: float | None, unit: str = "", digits: int = 2) -> str:
    """A number as the tables show it; ``—`` when there is none."""
    return "—" if x is None else f"{x:.{digits}f}{unit}"


def p50(values: Sequence[float | None]) -> float | None:
    """The median of the values present, ``None`` when none is."""
    present = [v for v in values if v is not None]
    return percentile(present, 50) if present else None


def results_table(result: SessionResult, runs: int) -> Table:
    """Bench's table: one row per tier, p50 over its runs when there are several; the fastest lane strong."""
    title = "tokrace" + (f" — p50 of {runs} runs" if runs > 1 else "")
    columns = [Column("tier"), Column("model"), Column("TTFT", True), Column("decode tok/s", True),
               Column("e2e", True), Column("tokens", True), Column("cost", True), Column("result")]
    table = Table(title, columns)
    fastest = min((m for lane in result.metrics for m in lane if m.ok and m.e2e_s), key=lambda m: m.e2e_s or 0,
                  default=None)
    for tier, ms in zip(result.tiers, result.metrics, strict=True):
        ok = [m for m in ms if m.ok]
        failed = [m for m in ms if not m.ok]
        pick: list[TurnMetrics] = ok or ms
        # a lane that never ran (failed before any answer) has no token count to give, not a count of zero
        count = p50([float(m.output_tokens) for m in pick if m.e2e_s is not None])
        source = pick[0].tokens_source if pick else "chunks"
        cost = p50([m.cost_usd for m in pick])
        reason = (failed[0].error or "") if failed else ""
        status = "ok" if not failed else f"{len(failed)} failed: {reason}"
        table.rows.append(Row(
            [tier.name, tier.model or tier.provider, fmt(p50([m.ttft_s for m in pick]), " s", 3),
             fmt(p50([m.decode_tok_s for m in pick]), "", 1), fmt(p50([m.e2e_s for m in pick]), " s"),
             "—" if count is None else f"{SOURCE_MARK.get(source, '')}{count:.0f}",
             "—" if cost is None else f"${cost:.4f}", status],
            strong=fastest is not None and fastest in ms, failed=len(failed), reason=reason))
    return table


def tokens_note(result: SessionResult) -> str | None:
    """What the marks on the token counts mean, when some count is not the provider's own."""
    if all(m.tokens_source == "usage" for lane in result.metrics for m in lane):
        return None
    encodings = sorted({m.encoding for lane in result.metrics for m in lane if m.encoding})
    by = f"tiktoken {', '.join(encodings)}" if encodings else "the tokenizer"
    return f"tokens: ≈ counted by {by}, ~ counted in chunks; otherwise the provider's usage"


def lane_bottlenecks(result: SessionResult, factor: float = WHAT_IF_FACTOR) -> list[Bottleneck]:
    """One bottleneck per lane that ran a loop, from its median run."""
    lanes: list[tuple[str, LoopMetrics]] = []
    for tier, runs in zip(result.tiers, result.metrics, strict=True):
        loop = representative(runs)
        if loop is not None:
            lanes.append((tier.name, loop))
    return bottlenecks(lanes, factor, reference_name(result.tiers))


def what_if_cell(what_if: WhatIf) -> str:
    """A what-if in a table cell: "76.4 s −40%" (never "0.0 s −100%" for a model that is not infinitely fast)."""
    return f"{duration(what_if.e2e_s, 1)} −{percent(what_if.sooner_pct / 100)}"


def speedup(value: float | None) -> str:
    """A speed-up as the tables show it (``1.62×``)."""
    return "—" if value is None else f"{value:.2f}×"


def bottleneck_table(result: SessionResult, factor: float, scenario: str, runs: int) -> Table:
    """Where a loop's time went: a row per lane, a column per part of the loop (seconds and share of the loop),
    the Amdahl bound, a what-if at ``factor``, and (with several lanes) end-to-end next to token speed-up."""
    rows = lane_bottlenecks(result, factor)
    order = ["model", *SEGMENT_KINDS]
    present = sorted({name for b in rows for name, _, _ in b.parts}, key=order.index)
    title = f"where the time goes — {scenario}" + (f" (median of {runs} runs)" if runs > 1 else "")
    compare = len(rows) > 1
    columns = [Column("tier"), Column("loop", True), *(Column(name, True) for name in present),
               *(Column(name, True) for name in ("Amdahl", f"{factor:g}× faster model",
                                                  *([speedup_header(result)] if compare else [])))]
    table = Table(title, columns, caption=BOTTLENECK_CAPTION)
    for b in rows:
        parts = {name: (s, share) for name, s, share in b.parts}
        cells = [f"{duration(parts[n][0], 1)} {percent(parts[n][1])}" if n in parts else "—" for n in present]
        what = what_if_cell(b.what_if)
        speedups = [f"{speedup(b.e2e_speedup)} | {speedup(b.token_speedup)}"] if compare else []
        table.rows.append(Row([b.name, duration(b.e2e_s, 1), *cells, speedup(b.amdahl_max_speedup), what, *speedups],
                              dim=not b.ok))
    return table


def speedup_header(result: SessionResult) -> str:
    """The speed-ups' column header, naming the reference lane they are against when the race has one."""
    reference = reference_name(result.tiers)
    return f"vs {reference}: e2e | tok/s" if reference is not None else "speed-up e2e | tok/s"


def finishes(e2e_speedup: float) -> str:
    """How a lane finished against another, in words that are true: "1.25× sooner", "in the same time" (a speed-up
    that prints as 1.00×), or "later (1.06× the time)" (never "0.94× sooner")."""
    if round(e2e_speedup, 2) > 1.0:
        return f"{e2e_speedup:.2f}× sooner"
    if round(e2e_speedup, 2) == 1.0 or e2e_speedup <= 0:
        return "in the same time"
    return f"later ({1 / e2e_speedup:.2f}× the time)"


def speedup_line(result: SessionResult, factor: float) -> str | None:
    """One sentence on the gap: the fastest lane's token speed-up against its end-to-end speed-up."""
    rows = [b for b in lane_bottlenecks(result, factor) if b.token_speedup is not None and b.e2e_speedup]
    base = next((b for b in rows if b.name == b.against), None)  # the lane the speed-ups are against
    best = max(rows, key=lambda b: b.token_speedup or 0.0, default=None)
    if base is None or best is None or best is base:
        return None
    return (f"{best.name} streams {best.token_speedup:.1f}× faster than {base.name} but finishes the loop "
            f"{finishes(best.e2e_speedup or 0.0)}; even an infinitely fast model could make {base.name}'s loop at most "
            f"{speedup(base.amdahl_max_speedup)} faster")


def summary_pieces(summary: RaceSummary) -> list[tuple[str, str]]:
    """The race screen's summary line as (text, style) pieces: who finished first, by how much, and every lane's
    speed-up against the slowest; styles are Rich style names (``bold``, ``bold red``) or empty."""
    pieces: list[tuple[str, str]] = []
    if summary.first is None:
        pieces.append(("no lane finished", "bold"))
    else:
        tied = summary.runner_up is not None and summary.lead_s is not None and summary.lead_s < TIE_S
        if tied:
            pieces += [(summary.first, "bold"), (" and ", ""), (summary.runner_up or "", "bold"),
                       (f" tied at {duration(summary.first_e2e)}", "")]
        else:
            pieces += [(summary.first, "bold"), (f" finished first in {duration(summary.first_e2e)}", "")]
        if summary.runner_up is not None and summary.lead_s is not None and not tied:
            pieces += [(f", {duration(summary.lead_s)} ahead of ", ""), (summary.runner_up, "bold")]
        if summary.slowest is not None:
            whole = "loop" if summary.loop else "turn"
            results = [r for r in summary.results if r.name != summary.slowest]
            speedups = ", ".join(
                f"{r.name} {'—' if r.tokens_speedup is None else f'{r.tokens_speedup:.1f}×'} tokens "
                f"{r.turn_speedup:.1f}× {whole}" for r in results)
            pieces.append((f" · against {summary.slowest}: {speedups}", ""))
    if summary.failed:
        pieces += [(" · ", ""), ("failed:", "bold red"), (f" {', '.join(summary.failed)}", "")]
    if summary.stopped:
        pieces += [(" · ", ""), ("stopped:", "bold"), (f" {', '.join(summary.stopped)}", "")]
    return pieces

