"""The comparison written out: the ``--json`` document of docs/design.md §12, the checklist table's cells (shared by the
terminal, Markdown and CSV), a GitHub Markdown table and CSV. Pure text, no terminal."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import PurePath
from typing import Any, Final

from ..model.printable import csv_cell
from ..model.units import NOT_KNOWN, counted, duration
from .analysis import TraceAnalysis
from .compare import ORIGINAL, Column, Comparison, TraceRow, amount, money, percent, price_text

CHECKLIST: Final[tuple[str, ...]] = (
    "total task time", "task time p50 / p90", "total cost", "TTFT p50 / p90", "tool wait", "retries per call",
    "human review", "model share", "Amdahl bound", "speed-up (95% CI)",
)
"""The rows of the comparison table, in the order the issue's checklist asks them."""


def seconds(value: float | None) -> str:
    """A duration as every table tells it: seconds (docs/design.md §6); ``—`` when not known."""
    return NOT_KNOWN if value is None else amount(value)


def _pair(a: float | None, b: float | None, fmt: Callable[[float], str]) -> str:
    if a is None or b is None:
        return NOT_KNOWN
    return f"{fmt(a)} / {fmt(b)}"


def cells(column: Column) -> list[str]:
    """One column of the checklist as printed."""
    def share(v: float | None) -> str:
        return f" ({percent(v)})" if v is not None else ""

    return [
        amount(column.total_task_s),
        _pair(column.task_p50, column.task_p90, amount),
        NOT_KNOWN if column.total_cost_usd is None else money(column.total_cost_usd),
        _pair(column.ttft_p50, column.ttft_p90, duration),
        seconds(column.tool_wait_s) + share(column.tool_share),
        NOT_KNOWN if column.retry_rate is None else f"{column.retry_rate:.2f}",
        f"{counted(column.human_steps, 'step')}, {seconds(column.human_review_s)}{share(column.human_share)}",
        NOT_KNOWN if column.model_share is None else percent(column.model_share),
        NOT_KNOWN if column.amdahl_max_speedup is None else f"{column.amdahl_max_speedup:.2f}×",
        NOT_KNOWN if column.speedup is None else f"{column.speedup:.2f}×" + (
            f" ({column.ci95[0]:.2f}–{column.ci95[1]:.2f})" if column.ci95 is not None else ""),
    ]


def table(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    """The checklist table: a header (the measure, then the original and each tier) and one row per measure."""
    columns = [cells(c) for c in cmp.columns]
    header = ["", *(c.name for c in cmp.columns)]
    return header, [[label, *(col[i] for col in columns)] for i, label in enumerate(CHECKLIST)]


def trace_label(row: TraceRow) -> str:
    """What to call a trace in a table: its file's name, and its session when the name does not say it."""
    name = PurePath(row.trace.file).name
    session = row.trace.session
    return f"{name} · {session}" if session and session not in name else name


def trace_table(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    """One row per trace: its task time as recorded and on each tier, with the speed-up."""
    header = ["trace", "format", "calls", ORIGINAL, *(p.name for p in cmp.profiles)]
    rows = []
    for r in cmp.rows:
        on = []
        for p in cmp.profiles:
            speed = r.speedup(p.name)
            on.append(seconds(r.on[p.name].e2e_s) + (f" ({speed:.2f}×)" if speed is not None else ""))
        rows.append([trace_label(r), r.trace.format, str(r.original.calls), seconds(r.original.e2e_s), *on])
    return header, rows


def footnotes(cmp: Comparison) -> list[str]:
    """What the table rests on: the tiers' profiles, the original's price, the interval's seed, the idle cap."""
    notes = [f"re-timed on {p.describe()}" for p in cmp.profiles]
    if cmp.kept_calls:
        calls = cmp.columns[0].calls
        notes.append(f"{cmp.kept_calls} of {calls} model calls record no output tokens: they keep their recorded "
                     "duration on every tier")
    notes.append(f"original price: {cmp.original_price}" + "".join(
        f"; {where}: {price_text(p)}" for where, p in cmp.original_prices.items()))
    notes += [f"{p.name} price: {price_text(p.price)}" for p in cmp.profiles]
    notes.append(f"speed-up = total task time as recorded ÷ on the tier; 95% interval: bootstrap over the "
                 f"traces, seed {cmp.seed}")
    notes.append(f"human time past {cmp.idle_cap_s:g} s of idle is away time, not review (--idle-cap)")
    ttft = cmp.columns[0]
    notes.append(f"original TTFT from the {ttft.ttft_calls} of {ttft.calls} model calls whose format records it; "
                 "tiers' TTFT is modelled")
    return notes + trace_notes(cmp)


def trace_notes(cmp: Comparison) -> list[str]:
    """What the traces do not record and what was skipped (each note once per format, with how many traces
    said it), and each file that gave no trace with why: the same words the plain analysis prints."""
    said: dict[str, int] = {}
    for r in cmp.rows:
        for note in r.trace.notes:
            key = f"{r.trace.format}: {note}"
            said[key] = said.get(key, 0) + 1
        if r.trace.skipped:
            key = f"{r.trace.file}: skipped {r.trace.skipped} unreadable line(s) or span(s)"
            said[key] = 1
    out = [note + (f" ({n} traces)" if n > 1 else "") for note, n in said.items()]
    out += [f"{file}: not read: {problem}" for file, problem in cmp.unread]
    return out


def _trace_json(row: TraceRow, cmp: Comparison) -> dict[str, Any]:
    trace = row.trace
    out: dict[str, Any] = {"file": trace.file, "format": trace.format, "session": trace.session,
                           "skipped": trace.skipped, **row.original.to_json()}
    out["notes"] = list(trace.notes)
    out["on"] = {p.name: _on_json(row.on[p.name], row.speedup(p.name)) for p in cmp.profiles}
    return out


def _on_json(analysis: TraceAnalysis, speedup: float | None) -> dict[str, Any]:
    data = analysis.to_json()
    return {"e2e_s": data["e2e_s"], "breakdown": data["breakdown"], "cost_usd": data["cost_usd"],
            "speedup": None if speedup is None else round(speedup, 6), "model_share": data["model_share"],
            "ttft_s": data["ttft_s"]}


def comparison_json(cmp: Comparison, version: str) -> dict[str, Any]:
    """The ``--json`` document: every trace with its figures on each tier, the summary per column, the verdict."""
    return {
        "tool": "tokrace", "version": version,
        "traces": [_trace_json(r, cmp) for r in cmp.rows],
        "summary": {c.name: c.to_json() for c in cmp.columns},
        "verdict": cmp.verdict,
        "tiers": [{"name": p.name, "ttft_s": p.ttft_s, "tok_s": p.tok_s, "prefill_tok_s": p.prefill_tok_s,
                   "price": _price_json(p.price)} for p in cmp.profiles],
        "original_price": cmp.original_price, "bootstrap_seed": cmp.seed, "idle_cap_s": cmp.idle_cap_s,
        "kept_calls": cmp.kept_calls,
    }


def _price_json(price: Any) -> dict[str, float | None] | None:
    if price is None:
        return None
    return {"input": price.input, "cached_input": price.cached_input, "cache_write": price.cache_write,
            "output": price.output}


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md_escape(h) for h in header) + " |",
             "|" + "|".join(["---", *(["---:"] * (len(header) - 1))]) + "|"]
    lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return lines


def markdown(cmp: Comparison) -> str:
    """The comparison as GitHub Markdown: the verdict, the checklist table, the per-trace table, the notes."""
    lines = [cmp.verdict, "", *_md_table(*table(cmp)), "", *_md_table(*trace_table(cmp)), ""]
    lines += [f"- {note}" for note in footnotes(cmp)]
    return "\n".join(lines) + "\n"


CSV_FIELDS: Final[tuple[str, ...]] = (
    "scope", "tier", "traces", "task_s", "task_p50_s", "task_p90_s", "cost_usd", "ttft_p50_s", "ttft_p90_s",
    "tool_wait_s", "tool_share", "retry_rate", "human_steps", "human_review_s", "human_share", "model_share",
    "amdahl_max_speedup", "speedup", "speedup_ci95_low", "speedup_ci95_high", "notes", "problem",
)
"""The CSV's columns: one row per column of the summary (scope ``all``), then one per trace and tier (the
trace's notes on its original row), then one per file that gave no trace (its ``problem``)."""


def _num(value: float | int | None) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:.6g}"


def csv_text(cmp: Comparison) -> str:
    """The comparison as CSV, raw numbers in seconds, USD and fractions (the same figures the table rounds)."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow([csv_cell(f) for f in CSV_FIELDS])
    for c in cmp.columns:
        ci = c.ci95 or (None, None)
        out.writerow([csv_cell(x) for x in [
                      "all", c.name, c.traces, _num(c.total_task_s), _num(c.task_p50), _num(c.task_p90),
                      _num(c.total_cost_usd), _num(c.ttft_p50), _num(c.ttft_p90), _num(c.tool_wait_s),
                      _num(c.tool_share), _num(c.retry_rate), c.human_steps, _num(c.human_review_s),
                      _num(c.human_share), _num(c.model_share), _num(c.amdahl_max_speedup), _num(c.speedup),
                      _num(ci[0]), _num(ci[1]), "", ""]])
    for r in cmp.rows:
        for name, a in [(ORIGINAL, r.original), *((p.name, r.on[p.name]) for p in cmp.profiles)]:
            e2e = a.e2e_s
            out.writerow([csv_cell(x) for x in [
                          r.trace.file, name, 1, _num(e2e), "", "", _num(a.cost_usd), _num(a.ttft_p50),
                          _num(a.ttft_p90), _num(a.breakdown["tool"]),
                          _num(a.breakdown["tool"] / e2e if e2e > 0 else None),
                          _num(a.retries / a.calls if a.calls else None), a.human_steps,
                          _num(a.breakdown["human"]), _num(a.breakdown["human"] / e2e if e2e > 0 else None),
                          _num(a.model_share), _num(a.amdahl_max_speedup),
                          _num(r.speedup(name) if name != ORIGINAL else None), "", "",
                          ";".join(r.trace.notes) if name == ORIGINAL else "", ""]])
    for file, problem in cmp.unread:
        out.writerow([csv_cell(x) for x in [file, "", 0, *([""] * (len(CSV_FIELDS) - 5)), "", problem]])
    return buf.getvalue()
