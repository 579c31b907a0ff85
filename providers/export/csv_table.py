"""A race as CSV: one row per lane and run (or, ``turns``, per model request), the metric names of docs/design.md §6 as
headers and the very values of ``--json`` (so a spreadsheet and a script read the same numbers)."""

from __future__ import annotations

import csv
import io
from typing import Any, Final

from ..metrics.turn import TurnMetrics
from ..model.events import SEGMENT_KINDS
from ..model.printable import csv_cell
from .race_data import ExportSource

METRIC_COLUMNS: Final[tuple[str, ...]] = (
    "ok", "error", "connect_s", "ttfb_s", "ttft_s", "ttfa_s", "ttfs_s", "e2e_s", "output_tokens", "tokens_source",
    "decode_tok_s", "e2e_tok_s", "itl_ms_mean", "itl_ms_p50", "itl_ms_p90", "itl_ms_p99", "itl_ms_max",
    "reads_paced_ms", "stalls", "cost_usd")
"""The metrics of a run or a turn, in the order of docs/design.md §6 (``itl_ms`` flattened to its mean and percentiles,
then why the percentiles are empty when they are: ``reads_paced_ms``)."""

LOOP_COLUMNS: Final[tuple[str, ...]] = ("turns", "model_share", "amdahl_max_speedup",
                                        *(f"breakdown_{kind}" for kind in SEGMENT_KINDS))
"""A loop's own metrics (only when some lane played one); ``breakdown_KIND`` is seconds of that kind."""

KEY_COLUMNS: Final[tuple[str, ...]] = ("tier", "provider", "model", "run")


def _metrics(m: TurnMetrics) -> dict[str, Any]:
    """One run's (or turn's) values as ``--json`` writes them, with ``itl_ms`` flattened."""
    data = m.to_json()
    itl = data.pop("itl_ms") or {}
    for q in ("mean", "p50", "p90", "p99", "max"):
        data[f"itl_ms_{q}"] = itl.get(q)
    return data


def rows(source: ExportSource, turns: bool = False) -> tuple[list[str], list[dict[str, Any]]]:
    """The header and the rows (as values, before they are written)."""
    result = source.result
    loop = source.loop is not None
    header = [*KEY_COLUMNS, *(["turn"] if turns else []), *METRIC_COLUMNS,
              *(LOOP_COLUMNS if loop and not turns else ())]
    out: list[dict[str, Any]] = []
    for index, (tier, lane) in enumerate(zip(result.tiers, result.metrics, strict=True)):
        for run, m in enumerate(lane):
            keys = {"tier": tier.name, "provider": source.provider(index), "model": tier.model,
                    "run": source.first_run + run}
            if turns:
                for i, turn in enumerate(getattr(m, "turns", None) or [m]):
                    out.append({**keys, "turn": i, **_metrics(turn)})
                continue
            data = _metrics(m)
            row = {**keys, **data}
            if loop:
                row["turns"] = len(data["turns"]) if "turns" in data else None
                parts = data.get("breakdown")
                for kind in SEGMENT_KINDS:
                    row[f"breakdown_{kind}"] = None if parts is None else parts.get(kind, 0.0)
            out.append(row)
    return header, out


def to_csv(source: ExportSource, turns: bool = False) -> str:
    """The CSV text (RFC 4180: comma-separated, quoted where needed, CRLF line ends)."""
    header, values = rows(source, turns)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([csv_cell(name) for name in header])
    for row in values:
        writer.writerow([csv_cell(row.get(name)) for name in header])
    return buffer.getvalue()
