"""The comparison's command-line side: --on on the demo tiers, --original-price, and the outputs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from providers.base import ConfigError, Price, TokraceError
from providers.config import Config, load_config
from providers.traces.model import Step, Trace
from tui.traces_compare import build_comparison, check_compare_args, original_price, write_comparison


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
                               "original_price": None, "seed": None, "json_target": None}
    base.update(kw)
    return argparse.Namespace(**base)


def test_original_price_parses_two_or_three_numbers() -> None:
    assert original_price("5,30") == Price(input=5.0, output=30.0)
    assert original_price("5, 30, 0.5") == Price(input=5.0, output=30.0, cached_input=0.5)
    for bad in ("5", "a,b", "1,2,3,4", "-1,2"):
        with pytest.raises(argparse.ArgumentTypeError):
            original_price(bad)


def test_on_the_demo_tiers_the_original_is_priced_like_the_tier_with_its_model(
        capsys: pytest.CaptureFixture[str]) -> None:
    traces = [coding_trace("a", 1.0), coding_trace("b", 2.0), coding_trace("c", 0.5)]
    cmp = build_comparison(traces, args(), Config(source=None), idle_cap_s=600.0)
    assert [c.name for c in cmp.columns] == ["original", "Sol standard", "Sol ultrafast"]
    assert cmp.columns[0].total_cost_usd is not None
    assert cmp.original_price == "the configured tier with the same model"
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
    with pytest.raises(TokraceError, match="--markdown needs --on"):
        check_compare_args(args(on=None, markdown="-"))
    with pytest.raises(TokraceError, match="cannot write it"):
        check_compare_args(args(csv_target=str(tmp_path / "nope" / "x.csv")))


def test_an_http_tier_without_a_profile_says_how_to_measure_it(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[[tiers]]\nname = "real"\nprovider = "openai"\nmodel = "m"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="tokrace calibrate --tiers 'real'"):
        build_comparison([coding_trace("a", 1.0)], args(on="real"), load_config(path), 600.0)
