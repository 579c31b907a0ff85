"""``tokrace bench`` shows a progress line on stderr while it races, when stderr is a terminal (issue 11)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tokrace.providers.model.events import Done, Error, Request
from tokrace.tui.cli.progress import BenchProgress
from tokrace.tui.main import main


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def here(in_tmp: Path) -> None:
    pass


def test_a_single_bench_run_shows_progress_on_a_terminals_stderr(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["bench", "--scenario", "coding-loop", "--fast-forward", "--no-record"]) == 0
    shown = terminal.getvalue()
    assert "racing" in shown and "lanes done" in shown and "model request" in shown
    assert "racing" not in capsys.readouterr().out


def test_no_progress_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--fast-forward", "--no-record"]) == 0
    assert "racing" not in capsys.readouterr().err


def test_the_line_counts_finished_lanes_and_model_requests() -> None:
    progress = BenchProgress(Console(file=Terminal(), force_terminal=True), runs=1, lanes=3, loop=False)
    assert progress._describe() == "0 of 3 lanes done"
    progress(0, Request(t=0.0))
    progress(0, Done(t=1.0))
    progress(1, Error(t=1.0, error="http", message="refused"))
    assert progress._describe() == "2 of 3 lanes done"
    loop = BenchProgress(Console(file=Terminal(), force_terminal=True), runs=2, lanes=2, loop=True)
    loop(0, Request(t=0.0))
    loop(0, Done(t=1.0))  # a turn of the loop, not its end
    loop(1, Request(t=0.0))
    assert loop._describe() == "0 of 2 lanes done · 2 model requests"
