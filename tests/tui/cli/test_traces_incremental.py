"""``tokrace traces`` builds its table and its JSON as the results come in (while the workers read on), and writes
byte for byte what drawing the whole table and dumping the whole document write."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from tokrace.tui.cli.tables import print_table
from tokrace.tui.cli.traces import (
    _FILES,
    _TRACES,
    DRAWN_TOGETHER,
    KINDS,
    TracesTable,
    _item_json,
    _joined_json,
    traces_table,
)

NAMES = ["a.jsonl", "fix [bold]it[/].jsonl", "emoji :smile: here.json", "日本語のセッション.jsonl", "tab\there.jsonl",
         "back\\slash.json", "line\nbreak.json", "x" * 70 + ".jsonl", "ok.jsonl"]


def rows(count: int, widen_at: int | None = None, names: list[str] | None = None) -> list[Any]:
    """Stand-ins of (trace, analysis) with what the table reads; a long name at ``widen_at`` widens a column
    after rows were drawn."""
    out = []
    for i in range(count):
        name = (names or ["s.jsonl"])[i % len(names or ["s.jsonl"])]
        if i == widen_at:
            name = "a-much-longer-session-name-than-the-others-" * 2 + ".jsonl"
        wall = None if i % 7 == 3 else 10.0 + i * 37.3
        trace = SimpleNamespace(file=f"/x/{name}", session=f"sess-{i}" if i % 3 else None,
                                format="claude-code" if i % 2 else "otlp")
        a = SimpleNamespace(e2e_s=wall, breakdown={k: (i * (n + 1)) % 97 / 3 for n, k in enumerate(KINDS)},
                            calls=i * 13, tool_calls=i * 1000)
        out.append((trace, a))
    return out


def drawn(out: Console, items: list[Any], incremental: bool) -> str:
    if incremental:
        table = TracesTable(out)
        for trace, a in items:
            table.add(trace, a)
        table.print(out)
    else:
        print_table(out, traces_table(items))
    assert isinstance(out.file, io.StringIO)
    return out.file.getvalue()


def console(width: int, color: bool) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=color, color_system="truecolor" if color else None)


@pytest.mark.parametrize("color", [False, True], ids=["plain", "colour"])
@pytest.mark.parametrize("width", [60, 130, 10_000])
@pytest.mark.parametrize("case", ["many", "widened", "hostile"])
def test_the_table_drawn_as_rows_come_in_is_the_whole_table(color: bool, width: int, case: str) -> None:
    items = {"many": rows(3 * DRAWN_TOGETHER + 5), "widened": rows(2 * DRAWN_TOGETHER + 3, widen_at=DRAWN_TOGETHER + 1),
             "hostile": rows(2 * DRAWN_TOGETHER + 1, names=NAMES)}[case]
    if case == "hostile":
        items = [item for item in items if "\t" not in item[0].file]  # a tab: see the next test
    expected = drawn(console(width, color), items, incremental=False)
    assert drawn(console(width, color), items, incremental=True) == expected
    assert expected.count("\n") > len(items)


def test_a_tab_in_a_name_leaves_the_table_to_rich() -> None:
    items = rows(DRAWN_TOGETHER + 2, names=NAMES)
    for color in (False, True):
        assert drawn(console(200, color), items, True) == drawn(console(200, color), items, False)


def test_the_json_written_item_by_item_is_the_whole_document_dumped() -> None:
    hostile = {"file": "a\"b\\c\u2028\n.json", "session": "\0files", "notes": ["\0traces", "日本", "\x1b[31m"],
               "nested": {"x": [1, 2.5, None, True], "y": {}}, "empty": [], "n": float("1e300")}
    for traces, files in (([hostile, {"a": 1}], [{"file": "\0traces"}]), ([], []), ([hostile], [])):
        doc = {"tool": "tokrace", "version": "0", "idle_cap_s": 300.0, "traces": traces, "files": files,
               "summary": {"original": {"notes": {"\0files": 1}, "x": []}}}
        stand_in = {**doc, "traces": _TRACES, "files": _FILES}
        got = _joined_json(stand_in, {_TRACES: [_item_json(t) for t in traces],
                                      _FILES: [_item_json(f) for f in files]})
        assert got == json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
