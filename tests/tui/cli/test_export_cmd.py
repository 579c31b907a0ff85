"""``tokrace export``: every format from the command line, the screen's SVG and asciicast, and bench's
``--markdown`` / ``--csv``."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pyte
import pytest
from exporting import record, replay_json

from tokrace.providers.recording import read_recording
from tokrace.providers.runs.replay_control import replay_duration
from tokrace.tui.app.export_media import FPS
from tokrace.tui.main import main


@pytest.fixture
def race(tmp_path: Path) -> Path:
    return record(tmp_path / "race.jsonl", max_tokens=24)


def test_each_format_goes_beside_the_recording_by_default(race: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for fmt, name in (("markdown", "race.md"), ("csv", "race.csv"), ("html", "race.html"),
                      ("otlp", "race.otlp.json")):
        assert main(["export", str(race), "--to", fmt]) == 0
        assert (race.parent / name).stat().st_size > 0
        assert f"exported to {race.parent / name} ({fmt}" in capsys.readouterr().err
    json.loads((race.parent / "race.otlp.json").read_text(encoding="utf-8"))


def test_dash_writes_to_stdout(race: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(race), "--to", "markdown", "-o", "-"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("## tokrace: ") and "| Sol ultrafast |" in out.out.replace("**", "")
    assert out.err == ""


@pytest.mark.parametrize(("argv", "message"), [
    (["--to", "csv", "--at", "3"], "--at applies to --to svg, not csv"),
    (["--to", "markdown", "--turns"], "--turns applies to --to csv, not markdown"),
    (["--to", "otlp", "--theme", "projector"], "--theme applies to --to cast or html or svg, not otlp"),
    (["--to", "svg", "--size", "12by4"], "--size: expected COLSxROWS"),
    (["--to", "cast", "--size", "10x4"], "outside 40x12"),
    (["--to", "html", "--theme", "nope"], "no theme named 'nope'"),
    (["--to", "csv", "--run", "3"], "no run 3 (it has 1)"),
    (["--to", "csv", "-o", "/no/such/folder/x.csv"], "cannot write the csv export"),
])
def test_bad_requests_are_one_line_and_exit_2(race: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                               message: str) -> None:
    assert main(["export", str(race), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_file_that_is_not_a_recording_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"hello": 1}\n', encoding="utf-8")
    assert main(["export", str(junk), "--to", "csv"]) == 2
    assert "neither a tokrace recording nor an agent trace" in capsys.readouterr().err
    assert not (tmp_path / "junk.csv").exists()


def test_html_takes_the_themes_colours_and_the_users_own_theme(race: Path, isolated_user_dirs: Path) -> None:
    out = race.parent / "page.html"
    assert main(["export", str(race), "--to", "html", "--theme", "projector", "-o", str(out)]) == 0
    assert "--seg-model:#0A408F" in out.read_text(encoding="utf-8")
    themes = isolated_user_dirs / "config" / "tokrace" / "themes"
    themes.mkdir(parents=True)
    (themes / "mine.toml").write_text('name = "mine"\nprimary = "#112233"\nbackground = "#FAFAFA"\n\n'
                                      '[variables]\nseg-model = "#ABCDEF"\n', encoding="utf-8")
    assert main(["export", str(race), "--to", "html", "--theme", "mine", "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "--seg-model:#ABCDEF" in page and "--primary:#112233" in page
    assert "--seg-tool:#D97D1C" in page  # what the file leaves out comes from the light built-in


def test_svg_shows_the_screen_at_its_end_or_at_a_moment(race: Path) -> None:
    end, early = race.parent / "end.svg", race.parent / "early.svg"
    assert main(["export", str(race), "--to", "svg", "-o", str(end)]) == 0
    assert main(["export", str(race), "--to", "svg", "--at", "0.1", "--size", "100x30", "-o", str(early)]) == 0
    final, first = end.read_text(encoding="utf-8"), early.read_text(encoding="utf-8")
    for svg in (final, first):
        ET.fromstring(svg)
        assert "Sol&#160;standard" in svg or "Sol standard" in svg
    assert "finished&#160;first" in final or "finished first" in final
    assert "finished&#160;first" not in first and "finished first" not in first


def play(cast: str) -> tuple[dict[str, object], list[list[object]], pyte.Screen]:
    """The cast's header, its events, and the terminal it leaves behind."""
    lines = cast.splitlines()
    header = json.loads(lines[0])
    events = [json.loads(line) for line in lines[1:]]
    screen = pyte.Screen(header["term"]["cols"], header["term"]["rows"])
    stream = pyte.Stream(screen)
    for _, code, data in events:
        if code == "o":
            stream.feed(data)
    return header, events, screen


def test_cast_is_asciicast_v3_with_the_races_timing(race: Path) -> None:
    out = race.parent / "race.cast"
    assert main(["export", str(race), "--to", "cast", "--size", "120x36", "-o", str(out)]) == 0
    header, events, screen = play(out.read_text(encoding="utf-8"))
    assert header["version"] == 3 and header["term"] == {"cols": 120, "rows": 36, "type": "xterm-256color"}
    assert all(isinstance(e, list) and len(e) == 3 and e[1] in ("o", "x") for e in events)
    assert all(isinstance(e[0], float | int) and e[0] >= 0 for e in events)
    assert events[-1][1:] == ["x", "0"] and all(e[1] == "o" for e in events[:-1])
    total = sum(float(e[0]) for e in events)  # v3 intervals: each since the event before
    assert abs(total - replay_duration(read_recording(race))) <= 1 / FPS
    shown = "\n".join(screen.display)
    assert re.search(r"Sol ultrafast finished first in [\d.]+ s", shown)
    assert all(name in shown for name in ("Sol standard", "Sol priority", "Sol ultrafast"))


def test_bench_writes_markdown_and_csv_with_the_numbers_of_its_json(tmp_path: Path, in_tmp: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    md, table, js = tmp_path / "r.md", tmp_path / "r.csv", tmp_path / "r.json"
    assert main(["bench", "--fast-forward", "--no-record", "--max-tokens", "20", "--markdown", str(md),
                 "--csv", str(table), "--json", str(js)]) == 0
    report = json.loads(js.read_text(encoding="utf-8"))
    text, rows = md.read_text(encoding="utf-8"), table.read_text(encoding="utf-8").splitlines()
    for tier in report["tiers"]:
        run = tier["runs"][0]
        assert f"| {run['ttft_s']:.3f} s |" in text.replace("**", "")
        assert any(row.startswith(f"{tier['name']},synthetic,") and f",{run['e2e_s']}," in row for row in rows)
    assert "decode" in capsys.readouterr().out  # the table still printed: every output went to a file


def test_bench_markdown_to_stdout_is_markdown_alone(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--fast-forward", "--no-record", "--max-tokens", "20", "--markdown", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## tokrace: ") and "┏" not in out
    assert main(["bench", "--fast-forward", "--no-record", "--csv", "-", "--json", "-"]) == 2
    assert "--json and --csv both ask for stdout" in capsys.readouterr().err


def test_replay_headless_takes_them_too(race: Path, tmp_path: Path) -> None:
    out = tmp_path / "again.csv"
    report = replay_json(race, tmp_path, "--csv", str(out))
    rows = out.read_text(encoding="utf-8").splitlines()
    assert len(rows) == 1 + len(report["tiers"])


def test_an_agent_trace_is_exported_as_replay_plays_it(race: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = race.parent / "agent.otlp.json"
    assert main(["export", str(race), "--to", "otlp", "-o", str(trace)]) == 0
    assert main(["export", str(trace), "--to", "markdown"]) == 0
    text = (race.parent / "agent.otlp.md").read_text(encoding="utf-8")
    assert "agent.otlp.json · recorded" in text and "(otlp trace)" in text
    assert "| **Sol ultrafast** |" in text
    svg = race.parent / "agent.svg"
    assert main(["export", str(trace), "--to", "svg", "-o", str(svg)]) == 0
    ET.fromstring(svg.read_text(encoding="utf-8"))
    assert main(["export", str(race.parent / "agent.otlp.md"), "--to", "csv"]) == 2
    assert "neither a tokrace recording nor an agent trace" in capsys.readouterr().err


def test_more_lanes_than_the_screen_shows_are_refused_for_svg_and_cast(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from tokrace.providers.model.tiers import TierSpec

    tiers = [TierSpec(name=f"lane {i}", provider="synthetic", model="m", options={"ttft_ms": 10, "tok_s": 900})
             for i in range(7)]
    path = record(tmp_path / "seven.jsonl", tiers, max_tokens=5)
    assert main(["export", str(path), "--to", "cast"]) == 2
    assert "the screen shows up to 6 lanes and this race has 7" in capsys.readouterr().err
    assert main(["export", str(path), "--to", "markdown"]) == 0


@pytest.mark.parametrize("fmt", ["markdown", "csv"])
def test_no_key_reaches_bench_exports(in_tmp: Path, write_config: Callable[..., Path],
                                      monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    key = "sk-live-0123456789abcdefSECRET"
    monkeypatch.setenv("LEAKY_KEY", key)
    config = write_config('[[tiers]]\nname = "leaky"\nprovider = "synthetic"\napi_key_env = "LEAKY_KEY"\n'
                          'ttft_ms = 10\ntok_s = 900\n')
    out = in_tmp / f"out.{fmt}"
    assert main(["bench", "--config", str(config), "--fast-forward", "--no-record", "--max-tokens", "8",
                 "--prompt", f"use {key} and Authorization: Bearer abc123def456ghi", f"--{fmt}", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert key not in text and "abc123def456ghi" not in text
    assert fmt != "markdown" or "use [redacted] and Authorization: Bearer [redacted]" in text.replace("\\", "")
