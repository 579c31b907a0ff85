"""The Markdown export: GitHub-flavoured tables with the very numbers `tokrace replay --headless` gives."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from exporting import failing_tiers, record, replay_json, source_of

from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.export.markdown import to_markdown
from tokrace.providers.model.tiers import TierSpec


def tables_of(markdown: str) -> list[list[list[str]]]:
    """Every GFM table in the text, as rows of cells (header first, the alignment row left out), unescaped and
    without emphasis."""
    found: list[list[list[str]]] = []
    block: list[str] = []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if block:
            rows = [split_row(row) for row in block]
            assert all(re.fullmatch(r":?-+:?", cell) for cell in rows[1]), block[1]
            assert all(len(row) == len(rows[0]) for row in rows), block
            found.append([rows[0], *rows[2:]])
            block = []
    return found


def split_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [unescape(cell.strip()) for cell in cells]


def unescape(cell: str) -> str:
    cell = re.sub(r"^\*\*(.*)\*\*$|^\*(.*)\*$", lambda m: m.group(1) or m.group(2) or "", cell)
    return re.sub(r"\\(.)", r"\1", cell)


def by_tier(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tier["name"]: tier["runs"][0] for tier in report["tiers"]}


def test_bench_table_has_the_numbers_of_replay_headless(tmp_path: Path) -> None:
    path = record(tmp_path / "race.jsonl")
    runs = by_tier(replay_json(path, tmp_path))
    [results] = tables_of(to_markdown(source_of(path)))
    assert results[0] == ["tier", "model", "TTFT", "decode tok/s", "e2e", "tokens", "cost", "result"]
    assert [row[0] for row in results[1:]] == [t.name for t in demo_tiers()]
    for row in results[1:]:
        run = runs[row[0]]
        assert row[2] == f"{run['ttft_s']:.3f} s"
        assert row[3] == f"{run['decode_tok_s']:.1f}"
        assert row[4] == f"{run['e2e_s']:.2f} s"
        assert row[5] == str(run["output_tokens"])
        assert row[6] == ("—" if run["cost_usd"] is None else f"${run['cost_usd']:.4f}")
        assert row[7] == "ok"


def test_summary_sentence_names_the_winner_and_the_fastest_row_is_bold(tmp_path: Path) -> None:
    path = record(tmp_path / "race.jsonl")
    runs = by_tier(replay_json(path, tmp_path))
    first = min(runs, key=lambda name: runs[name]["e2e_s"])
    text = to_markdown(source_of(path))
    assert f"**{first}** finished first in {runs[first]['e2e_s']:.2f} s" in text
    bold = [line for line in text.splitlines() if line.startswith(f"| **{first}**")]
    assert len(bold) == 1 and bold[0].count("**") == 16


def test_a_failed_lane_says_why(tmp_path: Path) -> None:
    path = record(tmp_path / "race.jsonl", failing_tiers())
    runs = by_tier(replay_json(path, tmp_path))
    text = to_markdown(source_of(path))
    [results] = tables_of(text)
    priority = next(row for row in results if row[0] == "Sol priority")
    assert priority[7] == f"1 failed: {runs['Sol priority']['error']}"
    assert "failed:** Sol priority" in text


def test_loop_adds_the_bottleneck_table_and_the_speedup_sentence(tmp_path: Path) -> None:
    path = record(tmp_path / "loop.jsonl", scenario="incident")
    runs = by_tier(replay_json(path, tmp_path))
    text = to_markdown(source_of(path))
    _, bottlenecks = tables_of(text)
    header = bottlenecks[0]
    assert header[:3] == ["tier", "loop", "model"] and "human" in header and "Amdahl" in header
    for row in bottlenecks[1:]:
        run = runs[row[0]]
        cells = dict(zip(header, row, strict=True))
        assert cells["loop"] == f"{run['e2e_s']:.1f} s"
        assert cells["Amdahl"] == f"{run['amdahl_max_speedup']:.2f}×"
        human = run["breakdown"]["human"]
        assert cells["human"] == f"{human:.1f} s {human / run['e2e_s']:.0%}"
    assert re.search(r"Sol ultrafast streams [\d.]+× faster than Sol standard but finishes the loop", text)
    assert "### where the time goes — incident" in text


@pytest.mark.parametrize("name", ["a|b *x* _y_ `z` <w>", "# not a heading"])
def test_markup_in_names_is_shown_as_written(tmp_path: Path, name: str) -> None:
    tiers = [TierSpec(name=name, provider="synthetic", model="m", options={"ttft_ms": 50, "tok_s": 500, "seed": 1}),
             demo_tiers()[2]]
    path = record(tmp_path / "race.jsonl", tiers)
    [results] = tables_of(to_markdown(source_of(path)))
    assert [row[0] for row in results[1:]] == [name, "Sol ultrafast"]


def test_an_export_names_its_recording_without_the_folder_it_is_in(tmp_path: Path) -> None:
    """An export is shown to others: its heading names the recording, never this machine's absolute path."""
    from tokrace.providers.export.html_report import to_html

    path = record(tmp_path / "talk.jsonl")
    source = source_of(path)
    markdown, html = to_markdown(source), to_html(source)
    assert "talk.jsonl · recorded " in markdown and " from talk.jsonl" in html
    assert str(tmp_path) not in markdown and str(tmp_path) not in html
