"""``tokrace traces PATH... --markdown FILE|- --csv FILE|-`` without ``--on``: the plain analysis as Markdown (the
terminal's tables, cell for cell) and CSV (one row per trace, the ``--json`` keys of docs/design.md §12 as headers)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tokrace.providers.model.printable import csv_cell

from .export_files import check_exports, write_output

if TYPE_CHECKING:
    from rich.table import Table


def flat(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects flattened with ``_`` (``breakdown_model``, ``ttft_s_p50``); lists joined with ``;``."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}_"))
        elif isinstance(value, list):
            out[f"{prefix}{key}"] = ";".join(str(v) for v in value)
        else:
            out[f"{prefix}{key}"] = value
    return out


def traces_csv(traces: Sequence[dict[str, Any]], unread: Sequence[tuple[str, str]] = ()) -> str:
    """One row per trace; an empty cell where a figure is missing; then one per file that gave no trace, with its
    ``problem``."""
    rows = [flat(t) for t in traces] + [{"file": file, "problem": problem} for file, problem in unread]
    header: list[str] = []
    for row in rows:
        header += [key for key in row if key not in header]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([csv_cell(k) for k in header])
    for row in rows:
        writer.writerow([csv_cell(row.get(k)) for k in header])
    return buffer.getvalue()


def traces_markdown(tables: Sequence[Table], unread: Sequence[tuple[str, str]] = ()) -> str:
    """The tables the terminal shows, one after the other, then the files that gave no trace and why."""
    from tokrace.providers.export.markdown import text as markdown_text  # the race's exports: only for Markdown

    from .rich_tables import markdown_table

    lines = ["## tokrace traces", ""]
    for table in tables:
        lines += [*markdown_table(table), ""]
    if unread:
        lines += ["**files not read**", ""]
        lines += [f"- {markdown_text(file)}: {markdown_text(problem)}" for file, problem in unread]
        lines.append("")
    return "\n".join(lines)


def check_targets(markdown: str | None, csv_target: str | None, json_target: str | None) -> None:
    """Before reading: one output at most on stdout, and every file writable."""
    exports = {k: v for k, v in (("markdown", markdown), ("csv", csv_target)) if v is not None}
    check_exports(exports, json_target)


def write_traces_exports(markdown: str | None, csv_target: str | None, tables: Sequence[Table],
                         traces: Sequence[dict[str, Any]], unread: Sequence[tuple[str, str]] = ()) -> None:
    if markdown is not None:
        write_output(traces_markdown(tables, unread), markdown, "Markdown")
    if csv_target is not None:
        write_output(traces_csv(traces, unread), csv_target, "CSV")
