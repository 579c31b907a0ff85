"""Unknown is not zero: what a trace does not record is said as missing, never shown as a firm answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokrace.providers.model.tiers import Price
from tokrace.providers.traces.analysis import analyse
from tokrace.providers.traces.compare import compare
from tokrace.providers.traces.read import read_file
from tokrace.providers.traces.retime import TierProfile


def rollout(tmp_path: Path, *, usage: bool) -> Path:
    """A Codex rollout: a prompt, a call with a web search and a shell call, its output, a final answer."""
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
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_codex_web_searches_are_tool_calls(tmp_path: Path) -> None:
    t = read_file(rollout(tmp_path, usage=True)).traces[0]
    a = analyse(t)
    assert a.tool_calls == 2 and {s.label for s in t.steps if s.kind == "tool"} == {"web_search", "shell"}
    assert any("1 web search ran inside the model's answers" in n for n in t.notes)


def test_a_rollout_without_token_counts_has_null_tokens_and_a_verdict_that_blames_no_price(tmp_path: Path) -> None:
    t = read_file(rollout(tmp_path, usage=False)).traces[0]
    a = analyse(t)
    data = a.to_json()
    assert data["input_tokens"] is None and data["output_tokens"] is None and data["cached_input_tokens"] is None
    assert any("no token counts recorded" in n for n in t.notes)
    tier = TierProfile("Sol standard", ttft_s=1.0, tok_s=54.0, prefill_tok_s=40_000.0, price=Price(5.0, 30.0))
    cmp = compare([t], [tier], original_price=Price(5.0, 30.0))
    assert "has no price" not in cmp.verdict and "would have saved" not in cmp.verdict
    assert cmp.verdict.startswith("On this trace, the model's 2 calls record no token counts, so the model's "
                                  "time cannot be re-timed on another tier; of ")
    assert "tools " in cmp.verdict


def test_a_partly_counted_set_names_the_calls_without_tokens_not_the_price(tmp_path: Path) -> None:
    counted = read_file(rollout(tmp_path, usage=True)).traces[0]
    other = tmp_path / "b"
    other.mkdir()
    bare = read_file(rollout(other, usage=False)).traces[0]
    tier = TierProfile("fast", ttft_s=0.1, tok_s=500.0, prefill_tok_s=1e6, price=Price(5.0, 30.0))
    cmp = compare([counted, bare], [tier], original_price=Price(5.0, 30.0))
    assert "at a cost not known (3 of 4 model calls record no token counts)" in cmp.verdict
    assert "3 of 4 model calls record no token counts: they keep their recorded time on every tier." in cmp.verdict


def test_not_a_trace_names_the_formats_what_the_file_looked_like_and_format(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"level": "info", "msg": "\\u001b[31mhi"}\n')
    problem = read_file(path).problem or ""
    assert problem.startswith("not a trace: its first line is a JSON object with keys 'level', 'msg'; ")
    assert "claude-code" in problem and "weka" in problem and "--format NAME" in problem


def test_a_file_nested_too_deeply_is_one_plain_sentence(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    for fmt in ("otlp", "weka"):
        problem = read_file(path, fmt).problem or ""
        assert "nested too deeply to read" in problem
        assert "Recursion" not in problem and "maximum" not in problem


def test_claude_code_time_before_the_first_prompt_is_kept(tmp_path: Path) -> None:
    def line(ts: str, kind: str, **kw: object) -> str:
        return json.dumps({"type": kind, "timestamp": f"2026-05-01T{ts}Z", "sessionId": "s1", "uuid": ts, **kw})

    rows = [line("10:00:00.000", "user", message={"role": "user",
                                                  "content": "<command-name>/clear</command-name>"}),
            line("10:00:00.100", "system", subtype="local_command", content="cleared"),
            line("10:55:00.000", "user", message={"role": "user", "content": "fix the test"}),
            line("10:55:05.000", "assistant", message={"id": "m1", "model": "claude-opus-4-7", "content": [],
                                                        "usage": {"input_tokens": 10, "output_tokens": 5}})]
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(rows) + "\n")
    t = read_file(path).traces[0]
    a = analyse(t, idle_cap_s=600)
    assert a.e2e_s + a.away_s == 3305.0  # the file's span: nothing vanishes
    assert a.away_s == 3300.0 - 600.0 and a.breakdown["human"] == 600.0
    assert any("from the file's first line to the first prompt" in n for n in t.notes)


def otlp_span(sid: str, parent: str, name: str, start: float, end: float, **attrs: object) -> dict[str, object]:
    return {"traceId": "t1", "spanId": sid, "parentSpanId": parent, "name": name,
            "startTimeUnixNano": str(int(start * 1e9)), "endTimeUnixNano": str(int(end * 1e9)),
            "attributes": [{"key": k, "value": {"stringValue": v} if isinstance(v, str) else {"intValue": v}}
                           for k, v in attrs.items()]}


def test_otlp_wall_time_is_the_root_span_and_a_duplicated_span_gives_a_note(tmp_path: Path) -> None:
    spans = [otlp_span("r", "", "POST /invoke", 0.0, 3.876),
             otlp_span("a", "r", "invoke_agent helper", 0.2, 3.705, **{"gen_ai.operation.name": "invoke_agent"}),
             otlp_span("m", "a", "chat gpt", 0.3, 3.6, **{"gen_ai.operation.name": "chat",
                                                          "gen_ai.usage.output_tokens": 20}),
             otlp_span("m", "a", "chat gpt", 0.3, 3.6, **{"gen_ai.operation.name": "chat",
                                                          "gen_ai.usage.output_tokens": 20})]
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    path = tmp_path / "kagent.json"
    path.write_text(json.dumps(doc, indent=1))
    t = read_file(path).traces[0]
    a = analyse(t)
    assert round(a.e2e_s, 6) == 3.876 and a.calls == 1 and a.output_tokens == 20
    assert round(a.model_share or 0, 2) == 0.85
    assert any("1 span id(s) seen twice" in n for n in t.notes)


def test_each_token_kind_gets_its_own_price_and_the_footnotes_say_which() -> None:
    from tokrace.providers.traces.analysis import step_cost_usd
    from tokrace.providers.traces.model import Step, Trace
    from tokrace.providers.traces.report import footnotes

    # 1,000 input of which 600 cache reads and 300 cache writes, 100 output
    step = Step("m", "model", 0, 1, input_tokens=1000, cached_input_tokens=600, cache_write_tokens=300,
                output_tokens=100)
    full = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    assert step_cost_usd(step, full) == pytest.approx((100 * 3 + 600 * 0.3 + 300 * 3.75 + 100 * 15) / 1e6)
    bare = Price(input=3.0, output=15.0)  # no cached or cache-write price: both at the input price
    assert step_cost_usd(step, bare) == pytest.approx((1000 * 3 + 100 * 15) / 1e6)
    tier = TierProfile("fast", ttft_s=0.1, tok_s=500.0, prefill_tok_s=1e6, price=bare)
    cmp = compare([Trace(file="t", format="test", steps=[step])], [tier], original_price=full)
    notes = footnotes(cmp)
    assert ("original price: --original-price; --original-price: input $3, cached input $0.3, cache writes $3.75, "
            "output $15 per M") in notes
    assert ("fast price: input $3, cached input at the input price (none set), cache writes at the input price "
            "(none set), output $15 per M") in notes


def test_a_sub_agents_next_message_is_not_a_persons_time(tmp_path: Path) -> None:
    def line(ts: str, kind: str, uuid: str, **kw: object) -> str:
        return json.dumps({"type": kind, "timestamp": f"2026-05-01T10:00:{ts}Z", "sessionId": "s2", "uuid": uuid,
                           **kw})

    def answer(ts: str, uuid: str, mid: str, side: bool = False) -> str:
        return line(ts, "assistant", uuid, isSidechain=side, message={
            "id": mid, "model": "m", "content": [], "usage": {"input_tokens": 10, "output_tokens": 5}})

    rows = [line("00.000", "user", "u1", message={"role": "user", "content": "go"}),
            answer("02.000", "a1", "m1"),
            # a sub-agent, inline: its prompt, its answer, then its parent's follow-up message
            line("02.500", "user", "s1", isSidechain=True, message={"role": "user", "content": "search"}),
            answer("04.000", "s2", "m2", side=True),
            line("10.000", "user", "s3", parentUuid="s2", isSidechain=True,
                 message={"role": "user", "content": "and the tests?"}),
            answer("12.000", "s4", "m3", side=True),
            line("20.000", "user", "u2", message={"role": "user", "content": "thanks"}),
            answer("21.000", "a2", "m4")]
    path = tmp_path / "s2.jsonl"
    path.write_text("\n".join(rows) + "\n")
    t = read_file(path).traces[0]
    humans = [(s.start, s.end, s.chain) for s in t.steps if s.kind == "human"]
    assert humans == [(2.0, 20.0, "main")]  # the person's gap only: 10:00:02 → 10:00:20


def test_a_tool_id_seen_twice_gives_a_note_not_a_silent_merge(tmp_path: Path) -> None:
    def line(ts: str, kind: str, payload: dict[str, object]) -> str:
        return json.dumps({"timestamp": f"2026-05-01T12:00:{ts}Z", "type": kind, "payload": payload})

    path = tmp_path / "rollout-dup.jsonl"
    path.write_text("\n".join([
        line("00.000", "session_meta", {"id": "dup"}),
        line("00.200", "event_msg", {"type": "user_message", "message": "go"}),
        line("01.000", "response_item", {"type": "function_call", "call_id": "c1", "name": "shell"}),
        line("02.000", "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}),
        line("03.000", "response_item", {"type": "function_call", "call_id": "c1", "name": "shell"}),
        line("05.000", "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"})]) + "\n")
    t = read_file(path).traces[0]
    assert any("1 tool call id(s) seen twice" in n for n in t.notes)


def test_a_claude_code_tool_id_in_two_calls_gives_a_note(tmp_path: Path) -> None:
    def line(ts: str, kind: str, uuid: str, **kw: object) -> str:
        return json.dumps({"type": kind, "timestamp": f"2026-05-01T10:00:{ts}Z", "sessionId": "s3", "uuid": uuid,
                           **kw})

    def use(ts: str, uuid: str, mid: str) -> str:
        return line(ts, "assistant", uuid, message={"id": mid, "model": "m", "usage": {"output_tokens": 5},
                                                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash"}]})

    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
    path = tmp_path / "s3.jsonl"
    path.write_text("\n".join([line("00.000", "user", "u1", message={"role": "user", "content": "go"}),
                               use("01.000", "a1", "m1"), use("01.500", "a1b", "m1"),  # same call, two lines
                               line("02.000", "user", "r1", message=result),
                               use("03.000", "a2", "m2"), line("04.000", "user", "r2", message=result)]) + "\n")
    t = read_file(path).traces[0]
    assert [n for n in t.notes if "seen in two model calls" in n] == [
        "1 tool id(s) seen in two model calls: counted once (the first)"]


def test_the_verdict_on_one_call_without_tokens_is_grammatical() -> None:
    from tokrace.providers.traces.model import Step, Trace

    trace = Trace(file="t", format="test", steps=[Step("m", "model", 0, 2), Step("t", "tool", 2, 5, after=("m",))])
    cmp = compare([trace], [TierProfile("fast", ttft_s=0.1, tok_s=500.0, prefill_tok_s=1e6)])
    assert cmp.verdict == ("On this trace, the model's 1 call records no token counts, so the model's time cannot "
                           "be re-timed on another tier; of 5.0 s of task time, the model's recorded calls 2.0 s "
                           "(40%), tools 3.0 s (60%).")
