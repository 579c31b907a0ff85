"""Tables are never cut: the terminal's width in a terminal, their full width when piped or with --wide, one
block per row when a terminal is too narrow; names, numbers and messages stay whole (issue 11)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.table import Table
from rich.text import Text

from tokrace.tui.cli import tables
from tokrace.tui.main import main


class Terminal(io.StringIO):
    """A stream that says it is a terminal, of the width COLUMNS gives."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def narrow(monkeypatch: pytest.MonkeyPatch, in_tmp: Path) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    tables.set_wide(False)


def plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def bench_table(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["bench", "--scenario", "coding-loop", "--fast-forward", "--no-record", *argv]) == 0
    return capsys.readouterr().out


def test_a_piped_bench_table_is_not_cut_to_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    out = bench_table(capsys)
    assert "…" not in out
    assert re.search(r"│ Sol standard +│ gpt-5\.6-sol +│ 1\.068 s │ +53\.5 │ 127\.04 s │", out)
    assert "finishes the loop 1.60× sooner; even an infinitely fast model could make Sol standard's loop at most " \
           "1.75× faster" in out  # one line, not wrapped at 80
    assert max(len(line) for line in out.splitlines()) > 80


def test_in_a_narrow_terminal_a_table_that_does_not_fit_becomes_blocks_never_cut() -> None:
    table = Table(title="tokrace")
    for col in ("tier", "model", "TTFT", "e2e", "result"):
        table.add_column(col, no_wrap=col != "result")
    table.add_row("Sol standard (a long tier name)", "gpt-5.6-sol-2026-08-13", "1.068 s", "127.04 s", "ok")
    stream = Terminal()
    out = tables.console(stream)
    assert out.width == 80
    tables.print_table(out, table)
    printed = plain(stream.getvalue())
    assert "…" not in printed
    assert "Sol standard (a long tier name)" in printed and "e2e: 127.04 s" in printed


def test_a_long_error_message_wraps_at_words_and_keeps_every_word() -> None:
    message = ("HTTP 429: the organisation's rate limit for requests per minute was reached; retry after "
               "twenty seconds or ask for a higher limit")
    table = Table()
    for col in ("tier", "e2e", "result"):
        table.add_column(col, no_wrap=col != "result")
    table.add_row("Sol standard", "127.04 s", f"1 failed: {message}")
    stream = Terminal()
    tables.print_table(tables.console(stream), table)
    printed = plain(stream.getvalue())
    assert "…" not in printed and "Sol standard" in printed and "127.04 s" in printed
    cells = " ".join(re.findall(r"│ ([^│]*?) *│$", printed, flags=re.M))
    assert " ".join(cells.split()) == f"1 failed: {message}"


def test_wide_lays_tables_out_at_their_full_width_even_in_a_terminal() -> None:
    stream = Terminal()
    assert tables.console(stream).width == 80
    tables.set_wide(True)
    try:
        assert tables.console(stream).width == tables.PIPED_WIDTH
    finally:
        tables.set_wide(False)


def test_wide_is_an_option_of_the_table_commands(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["bench"], ["replay", "x.jsonl"], ["recordings"], ["tiers"], ["scenarios"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        assert "--wide" in capsys.readouterr().out, command


def _traces_like(rows: int) -> Table:
    table = Table(title="traces", pad_edge=False, collapse_padding=True)
    for col in ("trace", "format", "wall", "model"):
        table.add_column(col, no_wrap=True)
    for i in range(rows):
        table.add_row(f"[bold]session-{i:05d}.jsonl[/] 文字", "claude-code", f"{i}.0 s", Text("31%"))
    return table


def test_a_table_an_upper_bound_shows_fitting_is_printed_as_the_measured_one_prints_it() -> None:
    table = _traces_like(50)
    assert tables.surely_fits(table, tables.PIPED_WIDTH)
    assert not tables.surely_fits(table, 40)  # in a narrow terminal: measured, never guessed
    fast = io.StringIO()
    tables.print_table(tables.console(fast), table)
    measured = io.StringIO()
    tables.console(measured).print(_traces_like(50))
    assert fast.getvalue() == measured.getvalue()


def test_the_upper_bound_counts_a_wide_character_twice_and_gives_up_on_other_cells() -> None:
    table = Table()
    table.add_column("name", no_wrap=True)
    table.add_row("文" * 10)  # 20 cells wide, though 10 characters
    assert not tables.surely_fits(table, 19 + table._extra_width)
    assert tables.surely_fits(table, 20 + table._extra_width + table.padding[1] + table.padding[3])
    table.add_row(Table())  # a cell Rich must measure
    assert not tables.surely_fits(table, tables.PIPED_WIDTH)
    tabbed = Table()
    tabbed.add_column("name")
    tabbed.add_row("a\tb")  # a tab widens to the next stop
    assert not tables.surely_fits(tabbed, tables.PIPED_WIDTH)
