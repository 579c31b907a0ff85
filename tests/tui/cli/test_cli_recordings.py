"""``tokrace recordings`` keeps file names whole; ``tokrace replay NAME`` finds a recording by its name or the start
of it in the recordings folder, and says clearly when none or several answer (issue 11)."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from tokrace.providers.recording import recordings_dir
from tokrace.tui.cli import tables
from tokrace.tui.main import main

LONG_PROMPT = ("Explain, for a team that is about to move its coding agent to a faster tier, why the bottleneck "
               "moves away from the model once it streams fast")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def recorded(capsys: pytest.CaptureFixture[str], in_tmp: Path) -> list[Path]:
    """Three recordings in the recordings folder: two of one minute, with long names."""
    folder = recordings_dir()
    paths = [folder / "20261201-0624-explain-why-the-bottleneck-moves-when-the-model-gets-fast.jsonl",
             folder / "20261201-0625-explain-why-the-bottleneck-moves-when-the-model-gets-faster.jsonl",
             folder / "20261202-0900-count-to-ten.jsonl"]
    for path in paths:
        assert main(["bench", "--fast-forward", "--max-tokens", "20", "--prompt", LONG_PROMPT,
                     "--record", str(path)]) == 0
    capsys.readouterr()
    return paths


def test_recordings_keeps_file_names_whole_at_160_columns(recorded: list[Path], monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    tables.set_wide(False)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["recordings"]) == 0
    printed = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())
    assert max(len(line) for line in printed.splitlines()) <= 160
    for path in recorded:
        assert path.name in printed, f"{path.name} is wrapped or cut"


@pytest.mark.parametrize("name", ["20261202-0900-count-to-ten.jsonl", "20261202-0900-count-to-ten", "20261202"])
def test_replay_finds_a_recording_by_its_name_or_a_unique_start(recorded: list[Path], name: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "replay", name, "--headless", "--fast-forward", "--json", "-")
    assert code == 0 and '"Sol ultrafast"' in out


def test_a_name_that_starts_several_recordings_is_refused_naming_them(recorded: list[Path],
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "replay", "20261201", "--headless")
    assert code == 2
    assert "'20261201' starts the names of 2 recordings" in err
    assert recorded[0].name in err and recorded[1].name in err and "give more of the name" in err


def test_a_name_nothing_answers_to_is_refused_naming_the_newest(recorded: list[Path],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "replay", "nothing-like-it", "--headless")
    assert code == 2
    assert "nothing-like-it: no such file, and no recording in" in err and recorded[2].name in err
    assert "Traceback" not in err


def test_with_no_recordings_at_all_the_error_says_so(capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    code, _, err = run(capsys, "replay", "talk", "--headless")
    assert code == 2 and "no recordings in" in err


def test_export_finds_a_recording_by_its_name_as_replay_does(recorded: list[Path], in_tmp: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "export", "20261202", "--to", "csv")
    assert code == 0, err
    written = in_tmp / "20261202-0900-count-to-ten.csv"  # in the current folder, not the recordings folder
    assert written.is_file() and "Sol ultrafast" in written.read_text(encoding="utf-8")


def test_a_fifo_named_by_its_bare_name_is_called_a_fifo_not_missing(in_tmp: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``tokrace replay fifo`` in the FIFO's folder said "fifo: no such file", naming other recordings."""
    import os

    os.mkfifo(in_tmp / "fifo")
    assert main(["replay", "fifo", "--headless"]) == 2
    err = capsys.readouterr().err
    assert "FIFO" in err and "no such file" not in err
