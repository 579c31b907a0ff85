"""The Gemini CLI and OpenTelemetry SDK console-dump readers on hand-written fixtures, and the properties every
reader holds on every fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokrace.providers.traces.analysis import analyse
from tokrace.providers.traces.compare import compare
from tokrace.providers.traces.read import detect, files, read_file
from tokrace.providers.traces.retime import TierProfile, retime

FIXTURES = Path(__file__).parent / "fixtures"
GEMINI = FIXTURES / "gemini-cli" / "session-2026-05-02T09-00-gem1.json"
DUMP = FIXTURES / "otel-sdk" / "console-dump.txt"


def test_both_formats_are_detected_from_their_content() -> None:
    assert detect(GEMINI) == "gemini-cli" and detect(DUMP) == "otel-sdk"


def test_a_gemini_session_with_thoughts_tool_calls_and_tokens_per_response() -> None:
    found = read_file(GEMINI)
    assert found.problem is None and found.format == "gemini-cli"
    t = found.traces[0]
    a = analyse(t)
    assert t.session == "gem-1"
    assert (a.calls, a.tool_calls, a.human_steps) == (4, 3, 1)
    # input + tool-use prompt; output + thoughts; the response with tokens null counts nothing (and is noted)
    assert (a.input_tokens, a.cached_input_tokens, a.output_tokens, a.reasoning_tokens) == (5750, 3000, 210, 80)
    assert any("1 response(s) without token counts" in n for n in t.notes)
    # 0 → 87 s (lastUpdated): tools run side by side from 4 s to 10 s, the person 14 → 74 s
    assert a.e2e_s == pytest.approx(87.0)
    assert a.breakdown == pytest.approx({"model": 19.0, "tool": 8.0, "human": 60.0, "retry": 0.0, "wait": 0.0})
    assert [s.label for s in t.steps if s.kind == "tool" and s.failed] == ["replace"]
    assert a.ttft_p50 is None


def test_an_otel_sdk_dump_dedupes_spans_and_counts_agent_usage_once() -> None:
    found = read_file(DUMP)
    assert found.problem is None and found.format == "otel-sdk"
    agent, openinference = found.traces
    a = analyse(agent)
    # two chats (one printed twice), one tool; invoke_agent's usage is the sum of its chats: not counted again
    assert (a.calls, a.tool_calls) == (2, 1)
    assert (a.input_tokens, a.output_tokens) == (1100, 100)
    assert round(a.e2e_s, 6) == 5.2
    assert any("1 span id(s) seen twice" in n for n in agent.notes)
    assert agent.skipped == 1  # the log line between the objects
    b = analyse(openinference)  # OpenInference attributes as the fallback
    assert (b.calls, b.input_tokens, b.output_tokens) == (1, 300, 30)
    assert openinference.steps[0].model == "gpt-4o-mini"


def test_a_truncated_dump_reads_what_is_whole(tmp_path: Path) -> None:
    text = DUMP.read_text()
    path = tmp_path / "cut.txt"
    path.write_text(text[: len(text) - 200])
    found = read_file(path, "otel-sdk")
    assert found.problem is None and found.traces[0].skipped >= 1


EVERY = [p for p in files([FIXTURES]) if read_file(p).traces]


@pytest.mark.parametrize("path", EVERY, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_reader_holds_the_properties_of_a_trace(path: Path) -> None:
    fast = TierProfile("fast", ttft_s=0.05, tok_s=2000.0, prefill_tok_s=1e6)
    slow = TierProfile("slow", ttft_s=3.0, tok_s=10.0)
    for trace in read_file(path).traces:
        first = min(s.start for s in trace.steps)
        last = max(max(s.end, s.start) for s in trace.steps)
        a = analyse(trace, idle_cap_s=600)
        assert sum(a.breakdown.values()) == pytest.approx(a.e2e_s, abs=1e-6)
        assert a.e2e_s + a.away_s == pytest.approx(last - first, abs=1e-6)  # nothing vanishes
        same = analyse(retime(trace, lambda s: s.duration), idle_cap_s=600)
        assert same.e2e_s == pytest.approx(a.e2e_s, abs=1e-6)
        if a.amdahl_max_speedup is not None:
            on = compare([trace], [fast, slow]).rows[0]
            assert all(on.speedup(n) is None or on.speedup(n) <= a.amdahl_max_speedup + 1e-6 for n in on.on)
        instant = TierProfile("instant", ttft_s=0.0, tok_s=float("inf"))
        crawl = TierProfile("very slow", ttft_s=60.0, tok_s=0.2)
        row = compare([trace], [fast, slow, instant, crawl]).rows[0]
        for name in row.on:  # recorded human time cannot depend on the model
            assert row.on[name].breakdown["human"] == pytest.approx(a.breakdown["human"], abs=1e-6), name
            assert row.on[name].away_s == pytest.approx(a.away_s, abs=1e-6), name


@pytest.mark.parametrize(("name", "text"), [
    ("gemini-cli", '{"sessionId": "s", "projectHash": "h", "messages": {"a": 1}}'),
    ("gemini-cli", '{"sessionId": "s", "projectHash": "h", "messages": [{"type": "gemini", "timestamp": '
                   '"2026-05-02T09:00:00Z", "thoughts": 5, "toolCalls": true, "tokens": "many"}, 7]}'),
    ("gemini-cli", "[1, 2]"),
    ("otel-sdk", '{"name": "x", "context": 3}\n{"context": {"span_id": ["a"]}, "attributes": '
                 '{"gen_ai.operation.name": ["chat"]}, "events": 4, "start_time": 1}\n\x00\x01garbage'),
    ("otel-sdk", ""),
])
def test_hostile_files_of_the_new_formats_end_in_a_plain_problem_or_a_trace(tmp_path: Path, name: str,
                                                                             text: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    found = read_file(path, name)
    assert found.problem is None or "Error" not in found.problem
    for trace in found.traces:
        analyse(trace)


def test_a_fifo_is_refused_instead_of_blocking(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    assert (read_file(fifo).problem or "").endswith("cannot read it (it is a FIFO (named pipe), not a regular file)")
