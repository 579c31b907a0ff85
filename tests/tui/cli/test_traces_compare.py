"""The comparison's command-line side: --on on the demo tiers, --original-price, and the outputs."""

from __future__ import annotations

import argparse
import csv as csvlib
import io
import json
from pathlib import Path

import pytest
from paths import ROOT

from tokrace.providers.config.load import Config, load_config
from tokrace.providers.model.errors import ConfigError, TokraceError
from tokrace.providers.model.tiers import Price
from tokrace.providers.traces.model import Step, Trace
from tokrace.tui.cli.traces_compare import build_comparison, check_compare_args, write_comparison
from tokrace.tui.main import main


def coding_trace(name: str, scale: float) -> Trace:
    """A small coding loop: think, run the tests, a person approves, answer."""
    steps = [
        Step(id="m1", kind="model", start=0.0, end=12.0 * scale, model="gpt-5.6-sol", input_tokens=8000,
             cached_input_tokens=6000, output_tokens=int(500 * scale), ttft_s=1.1),
        Step(id="t1", kind="tool", start=12.0 * scale, end=20.0 * scale, after=("m1",), label="pytest"),
        Step(id="m2", kind="model", start=20.0 * scale, end=30.0 * scale, after=("t1",), model="gpt-5.6-sol",
             input_tokens=9000, cached_input_tokens=8000, output_tokens=int(400 * scale), ttft_s=0.9),
        Step(id="h1", kind="human", start=30.0 * scale, end=45.0 * scale, after=("m2",), label="review"),
    ]
    return Trace(file=name, format="test", steps=steps)


def args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"on": "Sol standard,Sol ultrafast", "markdown": None, "csv_target": None,
                               "original_price": None, "seed": None, "json_target": None, "config": None}
    base.update(kw)
    return argparse.Namespace(**base)


def test_on_the_demo_tiers_the_original_is_priced_like_the_tier_with_its_model(
        capsys: pytest.CaptureFixture[str]) -> None:
    traces = [coding_trace("a", 1.0), coding_trace("b", 2.0), coding_trace("c", 0.5)]
    cmp = build_comparison(traces, args(), Config(source=None), idle_cap_s=600.0)
    assert [c.name for c in cmp.columns] == ["original", "Sol standard", "Sol ultrafast"]
    assert cmp.columns[0].total_cost_usd is not None
    # a demo tier's price is said to be a demo tier's, never "the configured tier" when no config exists
    assert cmp.original_price == "Sol standard's, a built-in demo tier with the same model"
    write_comparison(cmp, args())
    out = capsys.readouterr().out
    assert " ".join(out.split()).startswith(cmp.verdict)
    assert "Sol ultrafast would have saved" in cmp.verdict
    assert "total task time" in out and "per trace" in out


def test_json_to_stdout_is_the_only_output(capsys: pytest.CaptureFixture[str]) -> None:
    cmp = build_comparison([coding_trace("a", 1.0)], args(json_target="-"), Config(source=None), 600.0)
    write_comparison(cmp, args(json_target="-"))
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["summary"]) == {"original", "Sol standard", "Sol ultrafast"}
    assert doc["verdict"] == cmp.verdict


def test_markdown_and_csv_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md, csv = tmp_path / "c.md", tmp_path / "c.csv"
    a = args(markdown=str(md), csv_target=str(csv), original_price=Price(input=5.0, output=30.0))
    cmp = build_comparison([coding_trace("a", 1.0)], a, Config(source=None), 600.0)
    write_comparison(cmp, a)
    assert md.read_text(encoding="utf-8").startswith(cmp.verdict + "\n\n| ")
    assert csv.read_text(encoding="utf-8").startswith("scope,tier,traces,")
    assert cmp.verdict in " ".join(capsys.readouterr().out.split())


def test_two_outputs_on_stdout_are_refused() -> None:
    cmp = build_comparison([coding_trace("a", 1.0)], args(), Config(source=None), 600.0)
    with pytest.raises(TokraceError, match="only one of"):
        write_comparison(cmp, args(json_target="-", markdown="-"))


def test_compare_options_without_on_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TokraceError, match="--seed needs --on"):
        check_compare_args(args(on=None, seed=3))
    with pytest.raises(TokraceError, match="cannot write it"):
        check_compare_args(args(csv_target=str(tmp_path / "nope" / "x.csv")))


def test_an_http_tier_without_a_profile_says_how_to_measure_it(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[[tiers]]\nname = "real"\nprovider = "openai"\nmodel = "m"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="tokrace calibrate --tiers 'real'"):
        build_comparison([coding_trace("a", 1.0)], args(on="real"), load_config(path), 600.0)


EXAMPLES = ROOT / "examples" / "traces"
ON = "Sol standard,Sol ultrafast"
TRACE_KEYS = {"file", "format", "session", "models", "skipped", "calls", "tool_calls", "human_steps", "retries",
              "input_tokens", "cached_input_tokens", "output_tokens", "e2e_s", "away_s", "breakdown", "model_share",
              "amdahl_max_speedup", "ttft_s", "on"}
SUMMARY_KEYS = {"traces", "total_task_s", "task_s", "total_cost_usd", "ttft_s", "tool_wait_s", "tool_share",
                "retry_rate", "human_steps", "human_review_s", "human_share", "model_share", "amdahl_max_speedup"}


def test_traces_on_the_demo_tiers_prints_every_key_of_design_12(
        capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    assert main(["traces", str(EXAMPLES), "--on", ON, "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"tool", "version", "traces", "summary"} <= set(doc)
    assert len(doc["traces"]) == 5
    for entry in doc["traces"]:
        assert set(entry) >= TRACE_KEYS
        assert set(entry["breakdown"]) == {"model", "tool", "human", "retry", "wait"}
        assert set(entry["ttft_s"]) == {"p50", "p90"}
        for tier in ON.split(","):
            assert set(entry["on"][tier]) >= {"e2e_s", "breakdown", "cost_usd", "speedup"}
    assert list(doc["summary"]) == ["original", "Sol standard", "Sol ultrafast"]
    for name, column in doc["summary"].items():
        assert set(column) >= SUMMARY_KEYS
        assert ("speedup" in column) == (name != "original")
    ultra = doc["summary"]["Sol ultrafast"]["speedup"]
    assert ultra["ci95"] is None  # 5 traces: too few for an interval, and the verdict says why
    assert "No 95% interval: 5 traces are too few" in doc["verdict"]
    assert doc["verdict"].startswith("On these 5 traces, Sol ultrafast would have saved ")
    assert {f["format"] for f in doc["files"]} == {"weka"}


def test_traces_markdown_to_stdout_is_a_github_table(capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    assert main(["traces", str(EXAMPLES), "--on", ON, "--markdown", "-", "--original-price", "5,30,0.5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("On these 5 traces, Sol ultrafast would have saved ")
    assert lines[2:4] == ["|  | original | Sol standard | Sol ultrafast |", "|---|---:|---:|---:|"]
    assert lines[4].startswith("| total task time | ")


def test_traces_csv_to_stdout(capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    assert main(["traces", str(EXAMPLES), "--on", "Sol ultrafast", "--csv", "-"]) == 0
    rows = list(csvlib.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["scope"], r["tier"]) for r in rows[:2]] == [("all", "original"), ("all", "Sol ultrafast")]
    assert len(rows) == 2 + 5 * 2


def test_traces_on_an_unknown_tier_is_one_line(capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    assert main(["traces", str(EXAMPLES), "--on", "Sol warp"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tokrace: no tier named 'Sol warp'") and "Traceback" not in err


def test_markdown_without_on_is_the_plain_analysis(capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    assert main(["traces", str(EXAMPLES), "--markdown", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## tokrace traces") and "where the time went" in out and "speed-up" not in out
    assert main(["traces", str(EXAMPLES), "--seed", "3"]) == 2
    assert "--seed needs --on" in capsys.readouterr().err


def test_traces_on_with_nothing_readable_exits_2(capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    (in_tmp / "notes.txt").write_text("hello", encoding="utf-8")
    assert main(["traces", str(in_tmp / "notes.txt"), "--on", ON]) == 2
    assert "no trace read from 1 file" in capsys.readouterr().err


def test_a_tier_named_twice_or_original_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TokraceError, match="named twice"):
        build_comparison([coding_trace("a", 1.0)], args(on="Sol ultrafast,sol ultrafast"), Config(source=None), 600.0)
    path = tmp_path / "t.toml"
    path.write_text('[[tiers]]\nname = "Original"\nprovider = "synthetic"\n', encoding="utf-8")
    with pytest.raises(TokraceError, match="confused with the traces as recorded"):
        build_comparison([coding_trace("a", 1.0)], args(on="original"), load_config(path), 600.0)


def test_the_first_configured_tier_with_the_model_prices_the_original(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[[tiers]]\nname = "std"\nprovider = "synthetic"\nmodel = "gpt-5.6-sol"\n'
                    'price = { input = 5.0, output = 30.0 }\n'
                    '[[tiers]]\nname = "pri"\nprovider = "synthetic"\nmodel = "gpt-5.6-sol"\n'
                    'price = { input = 10.0, output = 60.0 }\n', encoding="utf-8")
    cmp = build_comparison([coding_trace("a", 1.0)], args(on="pri"), load_config(path), 600.0)
    original, pri = cmp.columns
    assert original.total_cost_usd is not None and pri.total_cost_usd is not None
    assert pri.total_cost_usd == pytest.approx(2 * original.total_cost_usd)


@pytest.mark.parametrize("on", [[], ["--on", "Sol standard,Sol ultrafast"]])
def test_piped_trace_tables_keep_file_names_and_figures_whole(on: list[str], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # Reported: piped, the tables were cut to 80 columns ("add-endpoint.j / son").
    examples = ROOT / "examples" / "traces"
    long_name = tmp_path / "a-rather-long-trace-file-name-for-the-table.json"
    long_name.write_bytes((examples / "add-endpoint.json").read_bytes())
    assert main(["traces", str(long_name), str(examples / "fix-flaky-test.json"), *on]) == 0
    out = capsys.readouterr().out
    assert "a-rather-long-trace-file-name-for-the-table.json" in out
    assert "fix-flaky-test.json" in out
