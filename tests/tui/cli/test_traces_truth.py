"""Every row of the table of "traces you can trust", end to end: ``tokrace traces FILE`` on a real-shaped file,
as ``--json -``, the terminal's tables, ``--markdown -`` and ``--csv -``, each reading as the truth, and all four
agreeing (docs/traces.md)."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT
from paths import TRACE_FIXTURES as FIXTURES

from tokrace.providers.traces.analysis import analyse
from tokrace.providers.traces.read import read_file
from tokrace.providers.traces.retime import TierProfile, retime_on
from tokrace.tui.main import main


@dataclass
class Outputs:
    """One command's four outputs: the JSON, the terminal's tables and the Markdown (whitespace folded, as a
    table's caption wraps), the CSV's rows, and stderr."""

    code: int
    doc: dict[str, Any]
    table: str
    md: str
    rows: list[dict[str, str]]
    err: str

    def all_text(self) -> tuple[str, str]:
        return self.table, self.md


def fold(text: str) -> str:
    return " ".join(text.split())


def outputs(capsys: pytest.CaptureFixture[str], *argv: str) -> Outputs:
    code = main(["traces", *argv, "--json", "-"])
    out, err = capsys.readouterr()
    doc = json.loads(out) if out.strip() else {}
    assert main(["traces", *argv]) == code
    table = capsys.readouterr().out
    assert main(["traces", *argv, "--markdown", "-"]) == code
    md = capsys.readouterr().out
    assert main(["traces", *argv, "--csv", "-"]) == code
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    return Outputs(code, doc, fold(table), fold(md), rows, err)


def detail(o: Outputs, label: str) -> tuple[float, float]:
    """A row of the per-trace detail table ("where the time went"), as the terminal and the Markdown print it."""
    term = re.search(rf"│ {re.escape(label)} │ ([\d.]+) │", o.table)
    md = re.search(rf"\| {re.escape(label)} \| ([\d.]+) \|", o.md)
    assert term and md, label
    return float(term.group(1)), float(md.group(1))


def write_weka(tmp_path: Path) -> Path:
    """A WEKA trace whose person answers 452 s after an ``end_turn`` and whose tool runs 4 s: ``think_time`` is the
    gap before a request, so the wall time ends at the last ``t`` + its ``api_time``."""
    doc = {"id": "think", "models": ["claude-opus-4-7"], "requests": [
        {"t": 0, "model": "claude-opus-4-7", "in": 1200, "out": 300, "api_time": 12, "ttft": 1.0, "think_time": 0,
         "stop": "end_turn"},
        {"t": 464, "model": "claude-opus-4-7", "in": 1500, "out": 400, "api_time": 15, "ttft": 1.1,
         "think_time": 452, "stop": "tool_use"},
        {"t": 483, "model": "claude-opus-4-7", "in": 1900, "out": 500, "api_time": 18, "ttft": 1.2,
         "think_time": 4, "stop": "end_turn"}]}
    path = tmp_path / "weka-think.json"
    path.write_text(json.dumps(doc))
    return path


def test_weka_think_time_is_the_gap_before_a_request(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    o = outputs(capsys, str(write_weka(tmp_path)))
    t = o.doc["traces"][0]
    assert t["e2e_s"] == 501.0 and t["breakdown"]["human"] == 452.0 and t["breakdown"]["tool"] == 4.0
    assert (t["human_steps"], t["tool_calls"], t["calls"]) == (1, 1, 3)
    assert detail(o, "wall time") == (501.0, 501.0) and detail(o, "human") == (452.0, 452.0)
    assert "501.0 s" in o.table and "| 501.0 s |" in o.md
    row = o.rows[0]
    assert float(row["e2e_s"]) == 501.0 and float(row["breakdown_human"]) == 452.0 and row["human_steps"] == "1"


def test_weka_think_time_speed_up_is_one_figure_in_all_four(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    o = outputs(capsys, str(write_weka(tmp_path)), "--on", "Sol ultrafast")
    on = o.doc["summary"]["Sol ultrafast"]
    model = 300 / 750 + 400 / 750 + 500 / 750 + 3 * 0.18 + (1200 + 1500 + 1900) / 400_000
    assert on["total_task_s"] == pytest.approx(501.0 - 45 + model, abs=1e-5)
    speedup = on["speedup"]["total"]
    assert speedup == pytest.approx(501.0 / on["total_task_s"], abs=1e-6)
    assert f"{speedup:.2f}×" in o.table and f"| {speedup:.2f}× |" in o.md
    assert [float(r["speedup"]) for r in o.rows if r["scope"] == "all" and r["tier"] == "Sol ultrafast"] == \
        [pytest.approx(speedup, rel=1e-5)]


def test_weka_sub_agent_records_and_an_unfinished_request_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    o = outputs(capsys, str(FIXTURES / "weka" / "w-siblings.json"))
    t = o.doc["traces"][0]
    assert (t["calls"], t["output_tokens"], t["input_tokens"], t["skipped"]) == (7, 1230, 6550, 0)
    note = "1 request never finished (no api_time): counted with 700 output tokens"
    assert any(note in n for n in t["notes"])
    for text in o.all_text():
        assert "7 model calls" in text and "6,550 in (cached not recorded), 1,230 out" in text
        assert note in text.replace("\\_", "_")
    row = o.rows[0]
    assert (row["calls"], row["output_tokens"], row["cached_input_tokens"]) == ("7", "1230", "")
    assert note in row["notes"]


def test_claude_code_time_before_the_first_prompt_after_clear_is_kept(capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path) -> None:
    def line(ts: str, kind: str, **kw: object) -> str:
        return json.dumps({"type": kind, "timestamp": f"2026-05-01T{ts}Z", "sessionId": "s1", "uuid": ts, **kw})

    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join([
        line("10:00:00.000", "user", message={"role": "user", "content": "<command-name>/clear</command-name>"}),
        line("10:00:00.100", "system", subtype="local_command", content="cleared"),
        line("10:55:00.000", "user", message={"role": "user", "content": "fix the test"}),
        line("10:55:05.000", "assistant", message={"id": "m1", "model": "claude-opus-4-7", "content": [],
                                                    "usage": {"input_tokens": 10, "output_tokens": 5}})]) + "\n")
    o = outputs(capsys, str(path))
    t = o.doc["traces"][0]
    assert (t["e2e_s"], t["away_s"], t["breakdown"]["human"]) == (605.0, 2700.0, 600.0)  # 3305 s: the file's span
    assert detail(o, "wall time") == (605.0, 605.0)
    assert detail(o, "away (past the idle cap, left out)") == (2700.0, 2700.0)
    note = "3300.0 s from the file's first line to the first prompt"
    assert any(note in n for n in t["notes"]) and all(note in text for text in o.all_text())
    row = o.rows[0]
    assert (float(row["e2e_s"]), float(row["away_s"])) == (605.0, 2700.0) and note in row["notes"]


def test_otlp_wall_time_is_the_root_span(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def span(sid: str, parent: str, name: str, start: float, end: float, **attrs: object) -> dict[str, object]:
        return {"traceId": "k1", "spanId": sid, "parentSpanId": parent, "name": name,
                "startTimeUnixNano": str(int((1_700_000_000 + start) * 1e9)),
                "endTimeUnixNano": str(int((1_700_000_000 + end) * 1e9)),
                "attributes": [{"key": k, "value": {"stringValue": v} if isinstance(v, str) else {"intValue": v}}
                               for k, v in attrs.items()]}

    spans = [span("r", "", "POST /api/a2a/kagent/k8s-agent", 0.0, 3.876),
             span("a", "r", "invoke_agent k8s_agent", 0.2, 3.705, **{"gen_ai.operation.name": "invoke_agent"}),
             span("m", "a", "chat gpt-4.1-mini", 0.3, 3.6, **{"gen_ai.operation.name": "chat",
                                                              "gen_ai.request.model": "gpt-4.1-mini",
                                                              "gen_ai.usage.input_tokens": 900,
                                                              "gen_ai.usage.output_tokens": 20})]
    path = tmp_path / "kagent.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    o = outputs(capsys, str(path))
    t = o.doc["traces"][0]
    assert t["e2e_s"] == 3.876 and t["model_share"] == pytest.approx(3.3 / 3.876, abs=1e-6)
    assert detail(o, "wall time") == (3.9, 3.9)
    for text in o.all_text():
        assert "model share 85%" in text and "| 86%" not in text
    assert float(o.rows[0]["e2e_s"]) == 3.876 and float(o.rows[0]["model_share"]) == t["model_share"]


def write_rollout(tmp_path: Path, *, usage: bool) -> Path:
    """A Codex rollout: a prompt, a web search, a shell call and its output, the answer; with or without the
    ``token_count`` events a newer Desktop build leaves out."""
    def line(ts: str, kind: str, payload: dict[str, object]) -> str:
        return json.dumps({"timestamp": f"2026-05-01T12:00:{ts}Z", "type": kind, "payload": payload})

    rows = [line("00.000", "session_meta", {"id": "cdx-web"}),
            line("00.100", "turn_context", {"model": "gpt-5.6-sol", "approval_policy": "never"}),
            line("00.200", "event_msg", {"type": "user_message", "message": "find it"}),
            line("02.000", "response_item", {"type": "web_search_call", "id": "ws_1", "status": "completed"}),
            line("03.000", "response_item", {"type": "function_call", "call_id": "c1", "name": "shell"}),
            line("07.000", "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}),
            line("09.000", "response_item", {"type": "message", "role": "assistant", "content": []})]
    if usage:
        info = {"last_token_usage": {"input_tokens": 100, "output_tokens": 10},
                "total_token_usage": {"input_tokens": 100, "output_tokens": 10}}
        rows.insert(5, line("03.500", "event_msg", {"type": "token_count", "info": info}))
    path = tmp_path / f"rollout-{'usage' if usage else 'bare'}.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_codex_without_token_counts_says_not_recorded_and_blames_no_price(capsys: pytest.CaptureFixture[str],
                                                                          tmp_path: Path) -> None:
    path = str(write_rollout(tmp_path, usage=False))
    o = outputs(capsys, path)
    t = o.doc["traces"][0]
    assert t["input_tokens"] is None and t["output_tokens"] is None and t["cached_input_tokens"] is None
    for text in o.all_text():
        assert "tokens not recorded" in text and "no token counts recorded" in text
    assert o.rows[0]["input_tokens"] == o.rows[0]["output_tokens"] == ""
    on = outputs(capsys, path, "--on", "Sol standard")
    verdict = on.doc["verdict"]
    assert verdict.startswith("On this trace, the model's 2 calls record no token counts, so the model's time "
                              "cannot be re-timed on another tier; of ")
    assert "price" not in verdict and "saved" not in verdict
    assert on.doc["tiers"][0]["price"] == {"input": 5.0, "cached_input": None, "cache_write": None, "output": 30.0}
    for text in on.all_text():
        assert fold(verdict) in text


def test_codex_web_searches_are_tool_calls(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    o = outputs(capsys, str(write_rollout(tmp_path, usage=True)))
    assert o.doc["traces"][0]["tool_calls"] == 2 and o.rows[0]["tool_calls"] == "2"
    for text in o.all_text():
        assert "2 tool calls" in text and "1 web search ran inside the model's answers" in text


def test_no_95_interval_over_fewer_than_ten_traces(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for name in ("add-endpoint.json", "fix-flaky-test.json", "incident-triage.json"):
        shutil.copy(ROOT / "examples" / "traces" / name, tmp_path / name)
    o = outputs(capsys, str(tmp_path), "--on", "Sol standard,Sol ultrafast")
    for tier in ("Sol standard", "Sol ultrafast"):
        speedup = o.doc["summary"][tier]["speedup"]
        assert speedup["ci95"] is None
        assert f"{speedup['total']:.2f}× │" in o.table and f"{speedup['total']:.2f}× |" in o.md
        assert f"{speedup['total']:.2f}× (" not in o.table + o.md
    assert all(r["speedup_ci95_low"] == r["speedup_ci95_high"] == "" for r in o.rows)
    assert o.doc["verdict"].endswith("No 95% interval: 3 traces are too few (10 or more needed).")
    assert all(o.doc["verdict"] in text for text in o.all_text())


def test_the_amdahl_bound_is_measured_with_parallel_sub_agents(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "claude-code" / "session-b.jsonl"
    trace = read_file(path).traces[0]
    assert any(s.chain != "main" for s in trace.steps)
    instant = analyse(retime_on(trace, TierProfile("instant", ttft_s=0.0, tok_s=float("inf")))).e2e_s
    o = outputs(capsys, str(path))
    bound = o.doc["traces"][0]["amdahl_max_speedup"]
    assert bound == pytest.approx(o.doc["traces"][0]["e2e_s"] / instant, abs=1e-6)
    for text in o.all_text():
        assert f"at most {bound:.2f}× faster with an instant model" in text
    assert float(o.rows[0]["amdahl_max_speedup"]) == bound


def test_human_seconds_are_the_same_on_every_tier_in_all_four(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "claude-code" / "session-background.jsonl")
    tiers = "Sol standard,Sol ultrafast"
    o = outputs(capsys, path, "--on", tiers)
    human = {name: col["human_review_s"] for name, col in o.doc["summary"].items()}
    assert set(human.values()) == {60.0}
    assert all(on["breakdown"]["human"] == 60.0 for on in o.doc["traces"][0]["on"].values())
    assert o.table.count("1 step, 60.0 s") == 3 and o.md.count("1 step, 60.0 s") == 3
    assert {float(r["human_review_s"]) for r in o.rows} == {60.0}


def test_a_tier_without_a_prefill_rate_is_named_in_the_verdict(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    config = tmp_path / "tiers.toml"
    config.write_text('[[tiers]]\nname = "flat"\nprovider = "synthetic"\nmodel = "m"\nttft_ms = 180\n'
                      'tok_s = 750\n', encoding="utf-8")
    o = outputs(capsys, str(write_weka(tmp_path)), "--on", "flat", "--config", str(config))
    caveat = "Input processing is not modelled on flat (no prefill_tok_s): its TTFT is the same whatever the input."
    assert caveat in o.doc["verdict"] and o.doc["tiers"][0]["prefill_tok_s"] is None
    assert all(caveat in text for text in o.all_text())


def test_each_token_kind_gets_its_price_and_the_verdict_says_which(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    def line(ts: str, kind: str, **kw: object) -> str:
        return json.dumps({"type": kind, "timestamp": f"2026-05-01T10:00:{ts}Z", "sessionId": "c1", "uuid": ts,
                           **kw})

    usage = {"input_tokens": 200, "cache_read_input_tokens": 40_000, "cache_creation_input_tokens": 3_000,
             "output_tokens": 400}
    path = tmp_path / "c1.jsonl"
    path.write_text("\n".join([
        line("00.000", "user", message={"role": "user", "content": "go"}),
        line("20.000", "assistant", message={"id": "m1", "model": "claude-opus-4-7", "content": [], "usage": usage}),
        line("50.000", "user", message={"role": "user", "content": "more"}),
        line("59.000", "assistant", message={"id": "m2", "model": "claude-opus-4-7", "content": [],
                                             "usage": usage})]) + "\n")
    o = outputs(capsys, str(path), "--on", "Sol standard", "--original-price", "5,30,0.5")
    t = o.doc["traces"][0]
    assert (t["input_tokens"], t["cached_input_tokens"]) == (86_400, 80_000)
    for caveat in ("Cached input (80,000 tokens) is priced at the input price for Sol standard, which sets no cached "
                   "input price.",
                   "Cache writes (6,000 tokens) are priced at the input price for the original and Sol standard, "
                   "which set no cache write price."):
        assert caveat in o.doc["verdict"] and all(caveat in text for text in o.all_text())
    assert t["cost_usd"] == pytest.approx((400 * 5 + 80_000 * 0.5 + 6_000 * 5 + 800 * 30) / 1e6)
    for line in ("original price: --original-price; --original-price: input $5, cached input $0.5, cache writes at "
                 "the input price (none set), output $30 per M",
                 "Sol standard price: input $5, cached input at the input price (none set), cache writes at the "
                 "input price (none set), output $30 per M"):
        assert all(line in text for text in o.all_text())


def test_gemini_cli_sessions_are_traces(capsys: pytest.CaptureFixture[str]) -> None:
    o = outputs(capsys, str(FIXTURES / "gemini-cli" / "session-2026-05-02T09-00-gem1.json"))
    t = o.doc["traces"][0]
    assert (t["format"], t["calls"], t["tool_calls"]) == ("gemini-cli", 4, 3)
    assert (t["input_tokens"], t["cached_input_tokens"], t["output_tokens"], t["reasoning_tokens"]) == \
        (5750, 3000, 210, 80)
    for text in o.all_text():
        assert "4 model calls, 3 tool calls" in text and "5,750 in (3,000 cached), 210 out" in text
    row = o.rows[0]
    assert (row["format"], row["calls"], row["input_tokens"], row["reasoning_tokens"]) == \
        ("gemini-cli", "4", "5750", "80")


def test_otel_sdk_dumps_are_traces_each_span_once(capsys: pytest.CaptureFixture[str]) -> None:
    o = outputs(capsys, str(FIXTURES / "otel-sdk" / "console-dump.txt"))
    assert o.doc["files"][0]["format"] == "otel-sdk" and o.doc["files"][0]["traces"] == 2
    assert [t["calls"] for t in o.doc["traces"]] == [2, 1]
    assert [t["output_tokens"] for t in o.doc["traces"]] == [100, 30]  # the agent span's sum not counted again
    assert [r["calls"] for r in o.rows] == ["2", "1"] and [r["format"] for r in o.rows] == ["otel-sdk"] * 2
    for text in o.all_text():
        assert "2 model calls" in text and "1 model call," in text
    assert "summary over 2 traces" in o.table and "summary over 2 traces" in o.md


def test_a_file_nested_too_deeply_and_a_non_trace_are_one_sentence_everywhere(capsys: pytest.CaptureFixture[str],
                                                                              tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    o = outputs(capsys, str(deep), "--format", "otlp")
    problem = o.doc["files"][0]["problem"]
    assert o.code == 2 and "nested too deeply to read" in problem and "Recursion" not in problem + o.err
    assert o.err.count("\n") == 2 and problem in o.err  # the file's sentence, then that nothing was read
    shutil.copy(FIXTURES / "weka" / "w-1.json", tmp_path / "w-1.json")
    shutil.copy(FIXTURES / "other" / "config.json", tmp_path / "config.json")
    deep.unlink()
    o = outputs(capsys, str(tmp_path))
    problem = next(f["problem"] for f in o.doc["files"] if f["file"].endswith("config.json"))
    assert problem.startswith("not a trace: its first line is a JSON object with keys 'name', 'items'; tokrace "
                              "reads tokrace, otlp, claude-code, codex, weka, gemini-cli, otel-sdk (force one with "
                              "--format NAME)")
    assert problem in o.err and problem in o.md
    assert [r["problem"] for r in o.rows if r["file"].endswith("config.json")] == [problem]
    on = outputs(capsys, str(tmp_path), "--on", "Sol ultrafast")
    assert problem in on.table and problem in on.md
    assert [r["problem"] for r in on.rows if r["scope"].endswith("config.json")] == [problem]


VERDICT = re.compile(
    r"On these (?P<n>\d+) traces, (?P<tier>.+?) would have saved (?P<saved>[\d.]+) s of (?P<total>[\d.]+) s "
    r"\((?P<pct>\d+)%\), at a cost not known \((?P<unpriced>.+?) has no price\); the model was (?P<share>\d+)% "
    r"of the time; no tier could save more than (?P<bound>\d+)%\. No 95% interval: (?P<few>\d+) traces are too "
    r"few \(10 or more needed\)\.")


def test_the_examples_verdict_is_literally_true_clause_by_clause(capsys: pytest.CaptureFixture[str]) -> None:
    o = outputs(capsys, str(ROOT / "examples" / "traces"), "--on", "Sol standard,Sol ultrafast")
    verdict = o.doc["verdict"]
    m = VERDICT.fullmatch(verdict)
    assert m, verdict
    summary, tiers = o.doc["summary"], {t["name"]: t for t in o.doc["tiers"]}
    original = summary["original"]
    # "On these 5 traces": every file read is a trace
    assert int(m["n"]) == len(o.doc["traces"]) == original["traces"] == 5
    assert all(f["problem"] is None for f in o.doc["files"])
    # "<tier> would have saved X s of Y s (Z%)": the tier that saves the most, from the totals the table prints
    best = max(tiers, key=lambda name: original["total_task_s"] - summary[name]["total_task_s"])
    saved = original["total_task_s"] - summary[best]["total_task_s"]
    assert m["tier"] == best == "Sol ultrafast"
    assert m["saved"] == f"{saved:.1f}" and m["total"] == f"{original['total_task_s']:.1f}"
    assert m["pct"] == f"{saved / original['total_task_s'] * 100:.0f}"
    assert f"{original['total_task_s']:.1f} s" in o.table and \
        f"{summary[best]['total_task_s']:.1f} s" in o.table
    # "at a cost not known (Sol ultrafast has no price)": the tier has none, and only that is why
    assert m["unpriced"] == best and tiers[best]["price"] is None and summary[best]["total_cost_usd"] is None
    assert original["total_cost_usd"] is not None and o.doc["kept_calls"] == 0
    # "the model was M % of the time": the original's model share
    assert m["share"] == f"{original['model_share'] * 100:.0f}"
    # "no tier could save more than B %": from the measured bound, which every tier stays within
    bound = 1 - 1 / original["amdahl_max_speedup"]
    assert m["bound"] == f"{bound * 100:.0f}"
    assert all(summary[name]["speedup"]["total"] <= original["amdahl_max_speedup"] + 1e-9 for name in tiers)
    # "No 95 % interval: 5 traces are too few": none is given
    assert int(m["few"]) == 5 and all(summary[name]["speedup"]["ci95"] is None for name in tiers)
    # no caveat is missing: the demo tiers model prefill, and WEKA records no cached tokens to price apart
    assert all(t["prefill_tok_s"] for t in tiers.values())
    assert all(t["cached_input_tokens"] is None for t in o.doc["traces"])
    # the same sentence leads the table and the Markdown
    assert o.table.startswith(verdict) and o.md.startswith(verdict)
