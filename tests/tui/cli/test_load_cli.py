"""``tokrace bench --concurrency``: the table, the JSON, CSV, Markdown and HTML of a sweep, and what it refuses."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tokrace.tui.main import main

CONFIG = """\
[defaults]
prompt = "Count."
max_tokens = 21

[[tiers]]
name = "quick"
provider = "synthetic"
ttft_ms = 100
tok_s = 200
jitter = 0

[[tiers]]
name = "slow"
provider = "synthetic"
ttft_ms = 400
tok_s = 50
jitter = 0
"""


@pytest.fixture(autouse=True)
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_tmp: Path) -> Path:
    monkeypatch.setenv("COLUMNS", "250")
    path = in_tmp / "tokrace.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["bench", "--fast-forward", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_sweep_prints_a_row_per_tier_and_level(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--concurrency", "1,4", "--requests", "8")
    assert code == 0
    assert "tokrace under load — 8 requests per tier and level" in out
    rows = [line for line in out.splitlines() if "quick" in line or "slow" in line]
    assert len(rows) == 4 and "TTFT p99" in out and "ITL p50" in out
    quick_1, quick_4 = (r for r in rows if "quick" in r)
    # 21 tokens in 0.2 s per request: 105 tok/s on one stream, four times that on four
    assert "105.0" in quick_1 and "420.0" in quick_4 and "0.100 s" in quick_1


def test_the_json_has_a_point_per_tier_and_level(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--concurrency", "2,4", "--duration", "1", "--json", "-")
    data = json.loads(out)
    assert code == 0 and data["mode"] == "concurrency"
    assert data["load"] == {"concurrency": [2, 4], "requests": None, "requests_per_level": [None, None],
                            "duration_s": 1.0}
    assert [(p["tier"], p["concurrency"]) for p in data["points"]] == [("quick", 2), ("slow", 2), ("quick", 4),
                                                                       ("slow", 4)]
    quick = data["points"][0]
    assert set(quick) >= {"requests", "ok", "failed", "window_s", "output_tokens", "delivered_tok_s",
                          "request_rate", "ttft_s", "decode_tok_s", "e2e_s", "itl_s", "rows"}
    assert quick["requests"] == 10 and quick["window_s"] == pytest.approx(1.0)  # 5 per stream, the last ends at 1.0


def test_csv_markdown_and_html_of_a_sweep(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, _ = run(capsys, "--concurrency", "1,2,8", "--requests", "8", "--csv", str(tmp_path / "l.csv"),
                     "--markdown", str(tmp_path / "l.md"), "--html", str(tmp_path / "l.html"))
    assert code == 0
    table = list(csv.DictReader(io.StringIO((tmp_path / "l.csv").read_text(encoding="utf-8"))))
    assert [(r["tier"], r["concurrency"]) for r in table][:2] == [("quick", "1"), ("slow", "1")]
    assert float(table[0]["ttft_s_p99"]) == pytest.approx(0.1) and float(table[0]["delivered_tok_s"]) == 105.0
    md = (tmp_path / "l.md").read_text(encoding="utf-8")
    assert "| tier | streams | requests | tok/s |" in md and "aggregate delivered tok/s" in md
    html = (tmp_path / "l.html").read_text(encoding="utf-8")
    svgs = [html[i:html.index("</svg>", i) + 6] for i in range(len(html)) if html.startswith("<svg viewBox", i)]
    assert len(svgs) == 2
    for svg in svgs:
        ET.fromstring(svg)  # well-formed
    assert "aggregate delivered tok/s" in svgs[0] and "TTFT p50 (solid) and p99 (dashed), ms" in svgs[1]
    assert svgs[0].count("<polyline") == 2 and svgs[1].count("<polyline") == 4  # a line per tier (p50, p99)
    assert "quick at 8 streams: 840.0 tok/s" in svgs[0]


def test_plain_bench_writes_html_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, _ = run(capsys, "--no-record", "--html", str(tmp_path / "race.html"))
    assert code == 0 and "<svg" in (tmp_path / "race.html").read_text(encoding="utf-8")


def test_a_failing_tier_exits_1_and_says_how_many(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    config.write_text(CONFIG + "fail_after_tokens = 3\n", encoding="utf-8")
    code, out, _ = run(capsys, "--concurrency", "2", "--requests", "4")
    assert code == 1 and "4 failed" in out


@pytest.mark.parametrize(("argv", "said"), [
    (["--requests", "5"], "--requests applies to a load: add --concurrency N"),
    (["--duration", "5"], "--duration applies to a load"),
    (["--concurrency", "4", "--runs", "3"], "does not take --runs"),
    (["--concurrency", "4", "--scenario", "coding-agent"], "does not take --scenario"),
    (["--concurrency", "4", "--voice"], "does not take --voice"),
    (["--concurrency", "4", "--record", "x.jsonl"], "does not take --record"),
])
def test_what_a_load_cannot_do_is_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], said: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and said in err and err.count("\n") == 1


@pytest.mark.parametrize(("value", "said"), [("0", "expected 1 to 256 streams"), ("4,x", "a list like 1,4,16,64"),
                                            ("4,4", "4 is given twice"), ("1000", "expected 1 to 256")])
def test_bad_levels_are_usage_errors(capsys: pytest.CaptureFixture[str], value: str, said: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bench", "--concurrency", value])
    assert exited.value.code == 2 and said in capsys.readouterr().err


def test_requests_and_duration_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--concurrency", "2", "--requests", "3", "--duration", "2"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_command_line_limits_are_the_engines() -> None:
    from tokrace.providers.runs import load
    from tokrace.tui.cli import parser

    assert (parser.MAX_STREAMS, parser.MAX_LEVELS) == (load.MAX_CONCURRENCY, load.MAX_POINTS)


def test_concurrency_in_a_terminal_opens_the_load_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from tokrace.tui.app import launch

    seen: dict[str, object] = {}

    def run_load(tiers: object, request: object, plan: object, **options: object) -> int:
        seen.update(tiers=tiers, plan=plan, options=options)
        return 0

    monkeypatch.setattr(launch, "run_load", run_load)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["--concurrency", "16", "--duration", "30"]) == 0
    plan = seen["plan"]
    assert (plan.concurrency, plan.duration_s) == ((16,), 30.0)  # type: ignore[attr-defined]
    assert [t.name for t in seen["tiers"]] == ["quick", "slow"]  # type: ignore[attr-defined]


def test_concurrency_piped_prints_the_load_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--concurrency", "2", "--requests", "2"]) == 0
    assert "tokrace under load — 2 requests per tier and level" in capsys.readouterr().out


def test_a_load_shows_its_progress_on_a_terminals_stderr(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["bench", "--fast-forward", "--concurrency", "2,4", "--requests", "8"]) == 0
    shown = terminal.getvalue()
    assert "load" in shown and "4 streams × 2 tiers: 16 requests done" in shown
    assert "requests done" not in capsys.readouterr().out
