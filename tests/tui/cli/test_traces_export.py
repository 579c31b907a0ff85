"""``tokrace traces --markdown/--csv`` without ``--on``: the terminal's tables as Markdown, a CSV row per trace."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from exporting import record

from tokrace.tui.main import main


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    """An OTLP trace file of three lanes (the export of a recorded loop)."""
    race = record(tmp_path / "loop.jsonl", scenario="incident")
    out = tmp_path / "loop.otlp.json"
    assert main(["export", str(race), "--to", "otlp", "-o", str(out)]) == 0
    return out


def test_markdown_holds_the_tables_with_the_figures_of_json(traces: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    js = tmp_path / "t.json"
    assert main(["traces", str(traces), "--json", str(js)]) == 0
    report = json.loads(js.read_text(encoding="utf-8"))
    capsys.readouterr()
    assert main(["traces", str(traces), "--markdown", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## tokrace traces") and "┏" not in out
    rows = [line for line in out.splitlines() if line.startswith("| loop.otlp.json ")]
    assert len(rows) == len(report["traces"]) == 3
    for trace in report["traces"]:
        assert f"| human | {trace['breakdown']['human']:.1f} |" in out


def test_csv_is_a_row_per_trace_with_the_json_keys(traces: Path, tmp_path: Path) -> None:
    js, table = tmp_path / "t.json", tmp_path / "t.csv"
    assert main(["traces", str(traces), "--json", str(js), "--csv", str(table)]) == 0
    report = json.loads(js.read_text(encoding="utf-8"))
    rows = list(csv.DictReader(io.StringIO(table.read_text(encoding="utf-8"), newline="")))
    assert [row["session"] for row in rows] == [t["session"] for t in report["traces"]]
    for row, trace in zip(rows, report["traces"], strict=True):
        assert float(row["e2e_s"]) == trace["e2e_s"]
        assert {k: float(row[f"breakdown_{k}"]) for k in trace["breakdown"]} == trace["breakdown"]
        assert float(row["ttft_s_p50"]) == trace["ttft_s"]["p50"]
        assert int(row["calls"]) == trace["calls"]


def test_two_outputs_on_stdout_are_refused(traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traces", str(traces), "--markdown", "-", "--csv", "-"]) == 2
    assert "both ask for stdout" in capsys.readouterr().err
