"""Each trace reader on its hand-written fixtures (``fixtures/``), figures computed by hand in comments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokrace.providers.traces.analysis import analyse
from tokrace.providers.traces.model import Trace
from tokrace.providers.traces.read import detect, files, read_file

FIXTURES = Path(__file__).parent / "fixtures"


def one(path: Path, format: str | None = None) -> Trace:
    found = read_file(path, format)
    assert found.problem is None, found.problem
    assert len(found.traces) == 1
    return found.traces[0]


def by_kind(trace: Trace, kind: str) -> list[tuple[float, float, str, str]]:
    return [(round(s.start, 6), round(s.end, 6), s.label, s.chain) for s in trace.steps if s.kind == kind]


@pytest.mark.parametrize(("path", "name"), [
    ("claude-code/session-a.jsonl", "claude-code"), ("codex/rollout-2026-05-01T12-00-00-cdx1.jsonl", "codex"),
    ("otlp/collector-export.jsonl", "otlp"), ("otlp/old-envelope.json", "otlp"), ("weka/w-1.json", "weka"),
    ("other/notes.txt", None), ("other/config.json", None)])
def test_the_format_is_detected_from_the_content(path: str, name: str | None) -> None:
    assert detect(FIXTURES / path) == name


def test_claude_code_session_with_split_calls_retry_failed_tool_inline_subagent_and_an_hour_away() -> None:
    t = one(FIXTURES / "claude-code/session-a.jsonl")
    assert t.format == "claude-code" and t.session == "sess-a"
    assert t.skipped == 1  # the line cut off mid-JSON
    models = by_kind(t, "model")
    # msg_1 over three lines is one call, from the prompt (0 s) to its last line (4 s)
    assert models[0][:2] == (0.0, 4.0)
    assert [m[:2] for m in models] == [(0, 4), (10, 11), (13, 16.5), (17, 19), (20, 23), (24, 26), (3626, 3629)]
    assert {m[3] for m in models[3:5]} == {"sidechain-s1"}
    assert by_kind(t, "retry") == [(11, 13, "retry", "main")]
    tools = by_kind(t, "tool")
    assert [(a, b, label) for a, b, label, _ in tools] == [(4, 10, "Bash"), (16, 17, "Read"), (16.5, 24, "sub-agent"),
                                                           (19, 20, "Grep")]
    assert [s.failed for s in t.steps if s.kind == "tool"] == [False, True, False, False]
    assert all(s.includes_approval for s in t.steps if s.kind == "tool")
    assert by_kind(t, "human") == [(26, 3626, "person", "main")]
    a = analyse(t)
    # model 4+1+3.5+2+3+2+3; tool 6 (Bash) + 0.5 (Read after the call) + 1 (Grep) + 1 (Task's tail); human 600
    assert a.breakdown == pytest.approx({"model": 18.5, "tool": 8.5, "human": 600.0, "retry": 2.0, "wait": 0.0})
    assert a.e2e_s == pytest.approx(629.0) and a.away_s == pytest.approx(3000.0)
    assert (a.calls, a.tool_calls, a.human_steps, a.retries, a.failed_tools) == (7, 4, 1, 1, 1)
    # usage grows over msg_1's lines: the largest counts, cache reads and writes both in the input
    assert models and t.steps[0].input_tokens == 1210 and t.steps[0].output_tokens == 40
    assert (a.input_tokens, a.cached_input_tokens, a.output_tokens) == (6229, 5300, 197)
    assert a.ttft_p50 is None
    assert a.models == ("claude-sonnet-4-5", "claude-haiku-4-5")


def test_claude_code_subagent_file_beside_the_session_is_read_with_it() -> None:
    t = one(FIXTURES / "claude-code/session-b.jsonl")
    sub = [s for s in t.steps if s.chain != "main"]
    assert [(s.kind, s.start, s.end, s.label) for s in sub] == [("model", 2.5, 5, "claude-haiku-4-5"),
                                                              ("tool", 5, 7, "Glob"),
                                                              ("model", 7, 9, "claude-haiku-4-5")]
    main_call = next(s for s in t.steps if s.kind == "model")
    assert sub[0].after == (main_call.id,)  # the sub-agent waits for the call that started it
    a = analyse(t)
    assert a.breakdown == pytest.approx({"model": 8.5, "tool": 3.5, "human": 0.0, "retry": 0.0, "wait": 0.0})
    assert a.e2e_s == 12.0 and (a.calls, a.tool_calls) == (4, 2)
    found = read_file(FIXTURES / "claude-code/session-b/subagents/agent-a1.jsonl")
    assert not found.traces and found.problem is not None and "read with its session" in found.problem


def test_codex_rollout_with_repeated_token_counts_parallel_tools_a_failure_and_an_hour_away() -> None:
    t = one(FIXTURES / "codex/rollout-2026-05-01T12-00-00-cdx1.jsonl")
    assert t.format == "codex" and t.session == "cdx-1" and t.skipped == 1
    assert [m[:2] for m in by_kind(t, "model")] == [(0, 4.5), (8, 10.5), (15, 18), (3618, 3620)]
    tools = by_kind(t, "tool")
    assert [(a, b, label) for a, b, label, _ in tools] == [(4, 8, "shell"), (10, 15, "shell"),
                                                           (10.2, 12, "apply_patch")]
    assert [s.failed for s in t.steps if s.kind == "tool"] == [True, False, False]
    # the two tools run in parallel: both wait for the call that asked for them, the next call waits for both
    call2 = t.steps[[s.kind for s in t.steps].index("model", 2)]
    parallel = [s for s in t.steps if s.kind == "tool"][1:]
    assert parallel[0].after == parallel[1].after == (call2.id,)
    call3 = [s for s in t.steps if s.kind == "model"][2]
    assert set(call3.after) == {p.id for p in parallel}
    a = analyse(t)
    assert a.breakdown == pytest.approx({"model": 12.0, "tool": 8.0, "human": 600.0, "retry": 0.0, "wait": 0.0})
    assert a.e2e_s == pytest.approx(620.0) and a.away_s == pytest.approx(3000.0)
    assert (a.calls, a.tool_calls, a.human_steps) == (4, 3, 1)
    assert (a.input_tokens, a.cached_input_tokens, a.output_tokens, a.reasoning_tokens) == (5400, 3900, 162, 50)


def test_otlp_nested_instrumentations_parallel_subagents_framework_spans_and_a_retry() -> None:
    found = read_file(FIXTURES / "otlp/collector-export.jsonl")
    assert found.problem is None and len(found.traces) == 2
    t, oi = found.traces
    assert t.session == "conv-42"
    assert t.skipped == 2  # the broken line and the span without times
    models = by_kind(t, "model")
    # call_llm > generate_content > openai.chat is one call: the innermost span, usage inherited where missing
    assert models[0][:2] == (0.7, 3.8)
    first = next(s for s in t.steps if s.kind == "model")
    assert (first.input_tokens, first.cached_input_tokens, first.output_tokens) == (500, 300, 40)
    assert first.model == "gemini-2.5-flash"
    tools = by_kind(t, "tool")
    labels = sorted(label for _, _, label, _ in tools)
    assert labels == ["read_file", "run_tests", "sub-agent", "sub-agent", "web_search"]  # not the merged wrapper
    assert len({chain for _, _, _, chain in models}) == 3  # main, researcher, reviewer
    assert [r[:2] for r in by_kind(t, "retry")] == [(11, 12)]
    a = analyse(t)
    # the critical path runs through the researcher (it ends last, 15 s); the reviewer's 2.1 s of model calls and
    # read_file beside run_tests are off it; the researcher's tail (14.5-15 s) is its sub-agent tool step's
    assert a.breakdown == pytest.approx({"model": 9.0, "tool": 8.0, "human": 0.0, "retry": 0.0, "wait": 3.0})
    assert a.parallel_s == pytest.approx({"model": 2.1, "tool": 1.9, "human": 0.0})
    assert a.e2e_s == pytest.approx(20.0)
    assert (a.calls, a.tool_calls, a.retries, a.failed_tools) == (5, 5, 1, 1)
    assert (a.input_tokens, a.cached_input_tokens, a.output_tokens) == (1700, 900, 150)
    assert a.ttft_p50 == pytest.approx(0.4) and a.ttft_p90 == pytest.approx(0.48)
    b = analyse(oi)
    assert b.breakdown == pytest.approx({"model": 3.0, "tool": 5.0, "human": 0.0, "retry": 0.0, "wait": 2.0})
    assert b.ttft_p50 == pytest.approx(0.2) and b.calls == 2 and b.input_tokens == 120


def test_otlp_older_envelope_in_one_pretty_printed_document() -> None:
    t = one(FIXTURES / "otlp/old-envelope.json")
    a = analyse(t)
    assert a.e2e_s == 3.0 and a.breakdown["model"] == 2.0 and a.breakdown["tool"] == 1.0
    assert (a.input_tokens, a.output_tokens) == (10, 5)


def test_weka_relative_times_nested_parallel_subagents_and_an_hour_away() -> None:
    t = one(FIXTURES / "weka/w-1.json")
    assert t.session == "w-1" and t.skipped == 1
    assert by_kind(t, "tool") == [(2, 5, "", "main"), (9, 19, "sub-agent", "main"), (11, 13, "", "subagent-1")]
    # the second sub-agent's times start before the request that started it: relative to its start (9 s)
    assert by_kind(t, "model")[2:4] == [(9.5, 11, "claude-haiku-4-5", "subagent-1"),
                                         (9.5, 12.5, "claude-haiku-4-5", "subagent-2")]
    a = analyse(t)
    # the critical path runs through sub-agent 1 (ends at 15 s): sub-agent 2's model call (9.5-12.5 s) is off it
    assert a.breakdown == pytest.approx({"model": 14.5, "tool": 9.5, "human": 600.0, "retry": 0.0, "wait": 0.0})
    assert a.parallel_s == pytest.approx({"model": 3.0, "tool": 0.0, "human": 0.0})
    assert a.e2e_s == pytest.approx(624.0) and a.away_s == pytest.approx(3000.0)
    assert (a.calls, a.tool_calls, a.human_steps) == (7, 3, 1)
    assert (a.input_tokens, a.output_tokens) == (3030, 198)
    assert a.ttft_p50 == pytest.approx(1.0) and a.ttft_recorded == 3


def test_other_files_are_not_traces_and_missing_ones_say_so(tmp_path: Path) -> None:
    assert (read_file(FIXTURES / "other/notes.txt").problem or "").startswith("not a trace: it is not JSON; "
                                                                         "tokrace reads tokrace, otlp")
    missing = read_file(tmp_path / "nope.jsonl")
    assert missing.problem is not None and "nope.jsonl" in missing.problem


def test_a_forced_format_on_the_wrong_file_gives_a_problem_and_no_trace_never_a_crash() -> None:
    for name in ("claude-code", "codex", "otlp", "weka", "tokrace"):
        for path in files([FIXTURES]):
            found = read_file(path, name)
            if detect(path) == name:
                assert found.problem is None and found.traces, (name, path)
            else:
                assert found.problem is not None and not found.traces, (name, path)


def test_folders_are_searched_recursively_in_order() -> None:
    names = [p.relative_to(FIXTURES).as_posix() for p in files([FIXTURES])]
    assert names == sorted(names, key=lambda n: Path(n).parts)
    assert "claude-code/session-b/subagents/agent-a1.jsonl" in names and "other/notes.txt" in names


def test_garbage_and_truncated_files_are_read_without_a_crash(tmp_path: Path) -> None:
    cases = {
        "binary.jsonl": bytes(range(256)) * 10,
        "empty.jsonl": b"",
        "cut.json": b'{"resourceSpans": [{"scopeSpans": [{"spans": [',
        "weird-claude.jsonl": b'{"type": "assistant", "uuid": "x", "sessionId": "s", "timestamp": 5, '
                              b'"message": "not an object"}\n{"type": "user", "uuid": "y", "sessionId": "s"}\n',
        "weird-codex.jsonl": b'{"timestamp": "2026-01-01T00:00:00Z", "type": "event_msg", "payload": {"type": '
                             b'"token_count", "info": {"total_token_usage": [1, 2]}}}\n',
        "weird-weka.json": b'{"requests": [{"t": 0, "api_time": -1}, {"t": 1, "api_time": 2, "subagent": [5]}]}',
        "deep.json": b'{"resourceSpans": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        found = read_file(path)
        assert found.problem is not None or found.traces, name
        for t in found.traces:
            analyse(t)


def test_json_lines_whose_first_line_is_longer_than_the_detection_window_are_read_as_lines(tmp_path: Path) -> None:
    span = {"traceId": "f" * 32, "spanId": "1" * 16, "name": "chat m", "startTimeUnixNano": "1000000000",
            "endTimeUnixNano": "3000000000", "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.prompt", "value": {"stringValue": "x" * 100_000}}]}
    line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    path = tmp_path / "big.jsonl"
    path.write_text(line + "\n" + line.replace('"1111111111111111"', '"2222222222222222"') + "\n")
    found = read_file(path)
    assert found.problem is None and analyse(found.traces[0]).calls == 2


def test_otlp_spans_marked_with_a_tokrace_step_kind_read_back_as_those_steps(tmp_path: Path) -> None:
    """The shape of tokrace's own OTLP export: an agent span over the lane, model calls, and people, waits and
    retries named by ``tokrace.step.kind``, in one pretty-printed document."""
    def span(sid: str, name: str, a: float, b: float, attrs: dict[str, object]) -> dict[str, object]:
        values = [{"key": k, "value": {"stringValue": v} if isinstance(v, str) else {"intValue": str(v)}}
                  for k, v in attrs.items()]
        return {"traceId": "e" * 32, "spanId": sid, "parentSpanId": "" if sid == "root" else "root", "name": name,
                "startTimeUnixNano": str(int(a * 1e9)), "endTimeUnixNano": str(int(b * 1e9)), "attributes": values}
    op, kind, out = "gen_ai.operation.name", "tokrace.step.kind", "gen_ai.usage.output_tokens"
    spans = [span("root", "invoke_agent lane", 0, 30, {op: "invoke_agent"}),
             span("m1", "chat x", 0, 2, {op: "chat", out: 10}),
             span("t1", "execute_tool grep", 2, 5, {op: "execute_tool", kind: "tool"}),
             span("h1", "human review", 5, 20, {kind: "human", "tokrace.label": "review"}),
             span("r1", "retry", 20, 22, {kind: "retry"}),
             span("m2", "chat x", 22, 25, {op: "chat", out: 5}),
             span("w1", "wait settle", 25, 30, {kind: "wait"})]
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}, indent=1))
    t = one(path)
    assert by_kind(t, "human") == [(5, 20, "review", "main")]
    a = analyse(t)
    assert a.breakdown == pytest.approx({"model": 5.0, "tool": 3.0, "human": 15.0, "retry": 2.0, "wait": 5.0})
    assert (a.calls, a.tool_calls, a.retries, a.output_tokens) == (2, 1, 1, 15)


def test_claude_code_subagent_files_of_the_older_layout_beside_the_session_are_read_with_it(tmp_path: Path) -> None:
    (tmp_path / "session-b.jsonl").write_bytes((FIXTURES / "claude-code/session-b.jsonl").read_bytes())
    agent = tmp_path / "agent-a1.jsonl"
    agent.write_bytes((FIXTURES / "claude-code/session-b/subagents/agent-a1.jsonl").read_bytes())
    t = one(tmp_path / "session-b.jsonl")
    assert {s.chain for s in t.steps} == {"main", "agent-a1"} and analyse(t).e2e_s == 12.0
    found = read_file(agent)
    assert not found.traces and found.problem is not None and "read with its session" in found.problem


def test_a_line_nested_too_deep_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    good = (FIXTURES / "codex/rollout-2026-05-01T12-00-00-cdx1.jsonl").read_text().splitlines()
    path.write_text("\n".join([*good[:3], "[" * 100_000 + "]" * 100_000, *good[3:]]) + "\n")
    t = one(path, "codex")
    assert t.skipped == 2 and analyse(t).calls == 4


def test_a_file_of_the_format_without_agent_steps_says_so(tmp_path: Path) -> None:
    http_only = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "d" * 32, "spanId": "1" * 16, "name": "GET /health", "startTimeUnixNano": "1",
         "endTimeUnixNano": "2", "attributes": [{"key": "http.request.method", "value": {"stringValue": "GET"}}]}]}]}]}
    (tmp_path / "http.jsonl").write_text(json.dumps(http_only) + "\n")
    (tmp_path / "summary.jsonl").write_text('{"type": "summary", "summary": "Old chat", "leafUuid": "x"}\n')
    for name, fmt in (("http.jsonl", "otlp"), ("summary.jsonl", "claude-code")):
        found = read_file(tmp_path / name)
        assert found.format == fmt and not found.traces
        assert found.problem is not None and found.problem.startswith("no agent steps in it")
