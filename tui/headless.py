"""Headless output for ``tokrace bench`` and ``tokrace replay --headless``: a Rich table for people, JSON for
machines, a progress display for repeated runs."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from providers.base import TierSpec, TurnRequest
from providers.metrics import TurnMetrics, percentile
from providers.recording import Recorder
from providers.session import SessionResult, report, run_session

SOURCE_MARK = {"usage": "", "tokenizer": "≈", "chunks": "~"}
"""How a token count is marked: exact from usage, ≈ from the tokenizer, ~ counted in chunks."""


def _fmt(x: float | None, unit: str = "", digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}{unit}"


def _p50(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return percentile(present, 50) if present else None


def results_table(result: SessionResult, runs: int) -> Table:
    """One row per tier: p50 over its runs when there are several."""
    title = "tokrace" + (f" — p50 of {runs} runs" if runs > 1 else "")
    table = Table(title=title, title_justify="left")
    for col, justify in (("tier", "left"), ("model", "left"), ("TTFT", "right"), ("decode tok/s", "right"),
                         ("e2e", "right"), ("tokens", "right"), ("cost", "right"), ("result", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    fastest = min((m for lane in result.metrics for m in lane if m.ok and m.e2e_s), key=lambda m: m.e2e_s or 0,
                  default=None)
    for tier, ms in zip(result.tiers, result.metrics, strict=True):
        ok = [m for m in ms if m.ok]
        failed = [m for m in ms if not m.ok]
        pick: list[TurnMetrics] = ok or ms
        tokens = _p50([float(m.output_tokens) for m in pick])
        source = pick[0].tokens_source if pick else "chunks"
        cost = _p50([m.cost_usd for m in pick])
        status = "[green]ok[/]" if not failed else f"[red]{len(failed)} failed[/]: {failed[0].error}"
        e2e = _p50([m.e2e_s for m in pick])
        style = "bold" if fastest is not None and fastest in ms else ""
        table.add_row(tier.name, tier.model or tier.provider, _fmt(_p50([m.ttft_s for m in pick]), " s", 3),
                      _fmt(_p50([m.decode_tok_s for m in pick]), "", 1), _fmt(e2e, " s"),
                      "—" if tokens is None else f"{SOURCE_MARK.get(source, '')}{tokens:.0f}",
                      "—" if cost is None else f"${cost:.4f}", status, style=style)
    return table


def write_json(result: SessionResult, target: str) -> None:
    """Write the JSON contract to a file, or stdout for ``-``."""
    text = json.dumps(report(result), indent=2, ensure_ascii=False)
    if target == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    else:
        Path(target).write_text(text + "\n", encoding="utf-8")


def run_headless(tiers: list[TierSpec], request: TurnRequest, *, runs: int, fast_forward: bool,
                 record: Path | None, prompt: str, json_target: str | None, warm: bool = False,
                 stall_threshold_s: float = 0.25, header_extra: dict[str, Any] | None = None) -> int:
    """Run, print, and return the exit code (0 all ok, 1 a run failed)."""
    err = Console(stderr=True)
    recorder = Recorder(record, prompt, tiers, extra=header_extra) if record is not None else None
    listeners = [recorder] if recorder is not None else []
    progress = None
    task = None
    if runs > 1:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("racing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=err, transient=True)
        task = progress.add_task("runs", total=runs)
        progress.start()

    def on_start(run: int) -> None:
        if recorder is not None:
            recorder.run = run

    def on_end(run: int) -> None:
        if progress is not None and task is not None:
            progress.update(task, completed=run + 1)

    try:
        result = asyncio.run(run_session(tiers, request, runs=runs, fast_forward=fast_forward,
                                         listeners=listeners, on_run_start=on_start, on_run_end=on_end,
                                         warm=warm, stall_threshold_s=stall_threshold_s))
    finally:
        if progress is not None:
            progress.stop()
        if recorder is not None:
            recorder.close()
    for warning in result.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if json_target != "-":
        Console().print(results_table(result, runs))
        if any(m.tokens_source != "usage" for lane in result.metrics for m in lane):
            err.print("tokens: ≈ counted by the tokenizer, ~ counted in chunks; otherwise the provider's usage",
                      style="dim", highlight=False)
    if json_target is not None:
        write_json(result, json_target)
    if recorder is not None:
        err.print(f"recorded to {record}", style="dim", highlight=False)
    return 0 if result.all_ok else 1
