"""Text from outside never controls the terminal: control sequences planted in a recording's tier names, models,
tool names and errors, and in an agent trace's session, model and tool names, come out of every output path
(bench's table, ``--markdown``, ``--csv``, ``--json``, every export format, ``traces`` and its exports) as visible
characters, never as the bytes a terminal obeys. CSV cells a spreadsheet would run are neutralised."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT

from tokrace.providers.model.printable import csv_cell, one_line
from tokrace.providers.recording import FORMAT, VERSION
from tokrace.tui.main import main

OSC52 = "\x1b]52;c;cHduZWQ=\x1b\\"
HOSTILE = f"{OSC52}\x1b]0;owned\x07\x1b[2J\x9b31m\x9d0;x\x07\x00\x7f\x1b]8;;http://x\x1b\\"
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")
"""A character a terminal may obey (a carriage return only as part of CSV's CRLF line end is allowed)."""

controls = st.text(alphabet=st.sampled_from(["\x1b", "[", "]", ";", "\x07", "\x9b", "\x9d", "\\", "\x00", "\r",
                                             "\n", "\t", "\x7f", "\x90", "0", "2", "J", "=", "+", "a"]),
                   min_size=1, max_size=24)


def recording(path: Path, text: str) -> Path:
    header = {"format": FORMAT, "version": VERSION, "prompt": f"Why?{text}", "scenario": None,
              "tiers": [{"name": f"A{text}", "provider": "synthetic", "model": f"m{text}"},
                        {"name": f"B{text}", "provider": f"openai{text}", "model": text}]}
    events = [{"lane": 0, "kind": "request", "t": 0.0, "model": text},
              {"lane": 0, "kind": "delta", "t": 0.2, "text": f"hi{text}"},
              {"lane": 0, "kind": "tool_call", "t": 0.3, "id": text, "name": f"Bash{text}", "arguments": "{}"},
              {"lane": 0, "kind": "done", "t": 0.5, "finish_reason": text},
              {"lane": 1, "kind": "request", "t": 0.0},
              {"lane": 1, "kind": "error", "t": 0.4, "error": text, "message": f"boom{text}"}]
    path.write_text("\n".join(json.dumps(x) for x in [header, *events]) + "\n", encoding="utf-8")
    return path


def trace(path: Path, text: str) -> Path:
    src = (ROOT / "tests/providers/traces/fixtures/claude-code/session-a.jsonl").read_text(encoding="utf-8")
    for name in ("sess-a", "claude-sonnet-4-5", "Bash"):
        src = src.replace(f'"{name}"', json.dumps(f"{name}{text}"))
    path.write_text(src, encoding="utf-8")
    return path


def assert_safe(what: str, out: str) -> None:
    found = CONTROL.search(out)
    assert found is None, f"{what}: {found.group()!r} at {found.start()}: {out[max(found.start() - 40, 0):][:80]!r}"


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    main(argv)
    captured = capsys.readouterr()
    return captured.out + captured.err


def every_output(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> dict[str, str]:
    rec = recording(tmp_path / "r.jsonl", text)
    tr = trace(tmp_path / "t.jsonl", text)
    outs = {
        "replay table": run(capsys, ["replay", str(rec), "--headless", "--fast-forward"]),
        "replay markdown": run(capsys, ["replay", str(rec), "--headless", "--fast-forward", "--markdown", "-"]),
        "replay csv": run(capsys, ["replay", str(rec), "--headless", "--fast-forward", "--csv", "-"]),
        "traces table": run(capsys, ["traces", str(tr)]),
        "traces markdown": run(capsys, ["traces", str(tr), "--markdown", "-"]),
        "traces csv": run(capsys, ["traces", str(tr), "--csv", "-"]),
        "recordings": run(capsys, ["recordings", "--dir", str(tmp_path)]),
    }
    for fmt in ("markdown", "csv", "otlp"):
        outs[f"export {fmt}"] = run(capsys, ["export", str(rec), "--to", fmt, "-o", "-"])
    return outs


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=controls)
def test_no_control_sequence_from_data_reaches_any_headless_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    for what, out in every_output(tmp_path, capsys, text).items():
        assert_safe(what, out)


def test_the_planted_sequences_show_as_visible_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outs = every_output(tmp_path, capsys, HOSTILE)
    for what, out in outs.items():
        assert_safe(what, out)
    assert "␛]52;c;" in outs["replay table"].replace("\n", "") or "␛]52" in outs["replay table"]
    assert "sess-a␛]52;c;" in outs["traces csv"] and "sess-a␛]52" in outs["traces table"]


def test_the_cast_and_svg_exports_carry_no_control_sequence_from_data(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = recording(tmp_path / "r.jsonl", HOSTILE)
    assert main(["export", str(rec), "--to", "cast", "-o", str(tmp_path / "r.cast")]) == 0
    played = "".join(json.loads(line)[2] for line in (tmp_path / "r.cast").read_text().splitlines()[1:]
                     if line.startswith("["))
    # tokrace's own styling is CSI (colours, cursor moves, modes); the planted OSC and C1 never appear
    assert "\x1b]52" not in played and "\x1b]0;owned" not in played and "\x9b" not in played
    assert "\x1b]8;;http://x" not in played and "\x07" not in played
    assert "␛]52;c;" in played
    assert main(["export", str(rec), "--to", "svg", "-o", str(tmp_path / "r.svg")]) == 0
    assert_safe("svg", (tmp_path / "r.svg").read_text(encoding="utf-8"))
    capsys.readouterr()


@pytest.mark.parametrize(("value", "cell"), [
    ("=HYPERLINK(\"http://x\",\"y\")", "'=HYPERLINK(\"http://x\",\"y\")"),
    ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
    ("-2+3", "'-2+3"),
    ("@SUM(1)", "'@SUM(1)"),
    ("\t=1", "' =1"),
    ("\r=1", "' =1"),
    ("-0.5", "-0.5"),
    ("+3", "+3"),
    (-0.25, "-0.25"),
    (12, "12"),
    (None, ""),
    (True, "true"),
    ("plain", "plain"),
])
def test_a_csv_cell_a_spreadsheet_would_run_is_neutralised_and_numbers_stay_numbers(value: object, cell: str) -> None:
    assert csv_cell(value) == cell


def test_every_csv_export_neutralises_formulas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = recording(tmp_path / "r.jsonl", "")
    text = rec.read_text().replace('"name": "A"', '"name": "=HYPERLINK(\\"http://x\\")"').replace(
        '"model": "m"', '"model": "@SUM(1)"')
    rec.write_text(text)
    tr = trace(tmp_path / "t.jsonl", "")
    tr.write_text(tr.read_text().replace('"Bash"', '"+cmd|\' /C calc\'!A0"').replace('"sess-a"', '"=1+1"'))
    outs = [run(capsys, ["replay", str(rec), "--headless", "--fast-forward", "--csv", "-"]),
            run(capsys, ["export", str(rec), "--to", "csv", "-o", "-"]),
            run(capsys, ["traces", str(tr), "--csv", "-"])]
    for out in outs:
        cells = [c for row in csv.reader(io.StringIO(out)) for c in row]
        assert not [c for c in cells if c[:1] in ("=", "+", "@") and c.strip("+-.0123456789eE")], cells
    assert "'=HYPERLINK" in outs[0] and "'@SUM(1)" in outs[1]


def test_one_line_shows_every_control_character_as_one_visible_character() -> None:
    assert one_line("a\x1b]0;t\x07b\nc\x9b\x7f") == "a␛]0;t␇b c\ufffd␡"
