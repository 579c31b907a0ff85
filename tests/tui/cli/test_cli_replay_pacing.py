"""A replay's speed and idle cap change how long it waits, never what it reports (issue 11, item 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from wall_clock import without_started_at

from tokrace.tui.main import main


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch, in_tmp: Path) -> None:
    monkeypatch.setenv("COLUMNS", "250")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


LOOP_KEYS = ("e2e_s", "breakdown", "model_share", "amdahl_max_speedup", "decode_tok_s", "ttft_s", "turns")


def loop_figures(report: dict[str, Any]) -> list[dict[str, Any]]:
    runs = [{key: run[key] for key in LOOP_KEYS} for tier in report["tiers"] for run in tier["runs"]]
    return without_started_at(runs)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def coding_loop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The coding loop raced on the demo tiers, recorded; its JSON and its table."""
    import contextlib
    import io

    path = tmp_path_factory.mktemp("loop") / "coding.jsonl"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["bench", "--scenario", "coding-loop", "--fast-forward", "--record", str(path),
                     "--json", "-"]) == 0
    return path, json.loads(out.getvalue())


@pytest.mark.parametrize("pacing", [["--idle-cap", "1"], ["--speed", "4"], ["--idle-cap", "0.5", "--speed", "2"]])
def test_a_paced_replay_of_the_coding_loop_reports_the_live_loop(
        capsys: pytest.CaptureFixture[str], coding_loop: tuple[Path, dict[str, Any]], pacing: list[str]) -> None:
    path, live = coding_loop
    code, out, _ = run(capsys, "replay", str(path), "--headless", "--fast-forward", "--json", "-", *pacing)
    assert code == 0
    assert loop_figures(json.loads(out)) == loop_figures(live)


def test_the_table_of_a_capped_replay_gives_the_live_speed_up_and_says_it_was_capped(
        capsys: pytest.CaptureFixture[str], coding_loop: tuple[Path, dict[str, Any]]) -> None:
    path, live = coding_loop
    code, out, err = run(capsys, "replay", str(path), "--headless", "--fast-forward", "--idle-cap", "1")
    assert code == 0
    standard, ultrafast = live["tiers"][0]["runs"][0], live["tiers"][2]["runs"][0]
    speedup = standard["e2e_s"] / ultrafast["e2e_s"]
    assert f"finishes the loop {speedup:.2f}× sooner" in out
    assert f"at most {standard['amdahl_max_speedup']:.2f}× faster" in out
    assert "idle pauses over 1 s played in 1 s" in err and "every figure is the recording's" in err


@pytest.mark.parametrize("speed", [[], ["--speed", "4"]])
def test_a_headless_replay_reads_its_file_once(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                               coding_loop: tuple[Path, dict[str, Any]], speed: list[str]) -> None:
    """Its tiers and each of its lanes read the same file: a long recording was read twice, lane logs and all."""
    from tokrace.providers.recording import reader

    reads: list[Path] = []
    real = reader._read

    def counted(path: Path) -> reader.Recording:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(reader, "_read", counted)
    path, _ = coding_loop
    code, _, _ = run(capsys, "replay", str(path), "--headless", "--fast-forward", *speed)
    assert code == 0 and reads == [path]


def test_a_recording_changed_since_it_was_read_is_read_again(tmp_path: Path,
                                                             coding_loop: tuple[Path, dict[str, Any]]) -> None:
    from tokrace.providers.recording import read_recording

    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(coding_loop[0].read_bytes())
    first = read_recording(copy)
    assert read_recording(copy) is first
    with copy.open("ab") as fh:
        fh.write(b"\n")
    assert read_recording(copy) is not first
