"""The CSV export: one row per lane and run (or per turn), docs/design.md §6 names as headers, and the values of
--json."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from exporting import failing_tiers, record, replay_json, source_of

from tokrace.providers.export.csv_table import METRIC_COLUMNS, to_csv

NUMBERS = {"connect_s", "ttfb_s", "ttft_s", "ttfa_s", "ttfs_s", "e2e_s", "decode_tok_s", "e2e_tok_s", "cost_usd",
           "itl_ms_mean", "itl_ms_p50", "itl_ms_p90", "itl_ms_p99", "itl_ms_max", "reads_paced_ms", "model_share",
           "amdahl_max_speedup"}
WHOLE = {"output_tokens", "stalls", "run", "turn", "turns"}


def read(text: str) -> list[dict[str, Any]]:
    """The CSV back as typed values: numbers, booleans, empty cells as ``None``."""
    out = []
    for row in csv.DictReader(io.StringIO(text, newline="")):
        typed: dict[str, Any] = {}
        for key, cell in row.items():
            if cell == "":
                typed[key] = None
            elif key == "ok":
                typed[key] = cell == "true"
            elif key in NUMBERS or key.startswith("breakdown_"):
                typed[key] = float(cell)
            elif key in WHOLE:
                typed[key] = int(cell)
            else:
                typed[key] = cell
        out.append(typed)
    return out


def expected(run: dict[str, Any]) -> dict[str, Any]:
    """A JSON run as the CSV flattens it."""
    flat = {key: run[key] for key in METRIC_COLUMNS if key in run}
    for q in ("mean", "p50", "p90", "p99", "max"):
        flat[f"itl_ms_{q}"] = (run["itl_ms"] or {}).get(q)
    return flat


def test_rows_round_trip_to_the_values_of_json(tmp_path: Path) -> None:
    path = record(tmp_path / "race.jsonl", failing_tiers(), runs=2)
    report = replay_json(path, tmp_path)
    rows = read(to_csv(source_of(path)))
    assert list(rows[0])[:4] == ["tier", "provider", "model", "run"]
    assert list(rows[0])[4:] == list(METRIC_COLUMNS)
    # the JSON says ``replay`` (it replayed); the CSV names what the lanes raced on
    assert {tier["provider"] for tier in report["tiers"]} == {"replay"}
    want = [(tier["name"], "synthetic", tier["model"], i, expected(run))
            for tier in report["tiers"] for i, run in enumerate(tier["runs"])]
    got = [(row["tier"], row["provider"], row["model"], row["run"], {k: row[k] for k in METRIC_COLUMNS})
           for row in rows]
    assert got == want
    assert any(row["ok"] is False and row["error"] for row in rows)


def test_a_loop_adds_its_breakdown_and_turns_give_a_row_per_request(tmp_path: Path) -> None:
    path = record(tmp_path / "loop.jsonl", scenario="incident")
    report = replay_json(path, tmp_path)
    source = source_of(path)
    rows = read(to_csv(source))
    for tier, row in zip(report["tiers"], rows, strict=True):
        run = tier["runs"][0]
        assert row["turns"] == len(run["turns"])
        assert row["model_share"] == run["model_share"]
        assert row["amdahl_max_speedup"] == run["amdahl_max_speedup"]
        assert {k.removeprefix("breakdown_"): v for k, v in row.items() if k.startswith("breakdown_") and v} == \
            {k: v for k, v in run["breakdown"].items() if v}
        assert abs(sum(v for k, v in row.items() if k.startswith("breakdown_")) - run["e2e_s"]) < 1e-5
    turns = read(to_csv(source, turns=True))
    want = [(tier["name"], i, expected(turn))
            for tier in report["tiers"] for i, turn in enumerate(tier["runs"][0]["turns"])]
    assert [(row["tier"], row["turn"], {k: row[k] for k in METRIC_COLUMNS}) for row in turns] == want


def test_one_run_of_several_keeps_its_number(tmp_path: Path) -> None:
    path = record(tmp_path / "race.jsonl", runs=3)
    rows = read(to_csv(source_of(path, run=2)))
    assert {row["run"] for row in rows} == {2}
    assert len(rows) == 3


def test_a_synthetic_race_names_its_own_provider_not_replay(tmp_path: Path) -> None:
    path = record(tmp_path / "race.jsonl")
    rows = read(to_csv(source_of(path)))
    assert {row["provider"] for row in rows} == {"synthetic"}
