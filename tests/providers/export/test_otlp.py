"""The OTLP export: GenAI spans (an agent per lane, a model call per turn with usage and time to first chunk, a
tool span per tool call), one trace per lane and run, stable ids."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from exporting import failing_tiers, record, replay_json, source_of

from tokrace.providers.export.otlp import to_otlp, to_otlp_json


def spans_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for rs in data["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


def attrs(span: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for kv in span["attributes"]:
        value = kv["value"]
        (kind, raw), = value.items()
        out[kv["key"]] = int(raw) if kind == "intValue" else [next(iter(v.values())) for v in raw["values"]] \
            if kind == "arrayValue" else raw
    return out


def seconds(span: dict[str, Any]) -> float:
    return (int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])) / 1e9


def test_an_agent_span_per_lane_a_model_span_per_turn_a_tool_span_per_call(tmp_path: Path) -> None:
    path = record(tmp_path / "loop.jsonl", scenario="incident")
    report = replay_json(path, tmp_path)
    spans = spans_of(json.loads(to_otlp_json(source_of(path))))
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_trace.setdefault(span["traceId"], []).append(span)
    assert len(by_trace) == len(report["tiers"])
    for tier, trace in zip(report["tiers"], by_trace.values(), strict=True):
        run = tier["runs"][0]
        agent, *steps = trace
        assert agent["name"] == f"invoke_agent {tier['name']}" and "parentSpanId" not in agent
        assert attrs(agent)["gen_ai.operation.name"] == "invoke_agent"
        assert abs(seconds(agent) - run["e2e_s"]) < 1e-6
        assert all(step["parentSpanId"] == agent["spanId"] for step in steps)
        models = [s for s in steps if attrs(s).get("gen_ai.operation.name") == "chat"]
        assert len(models) == len(run["turns"])
        for span, turn in zip(models, run["turns"], strict=True):
            a = attrs(span)
            assert span["name"] == f"chat {tier['model']}" and span["kind"] == 3
            assert a["gen_ai.usage.output_tokens"] == turn["output_tokens"]
            assert abs(a["gen_ai.response.time_to_first_chunk"] - turn["ttft_s"]) < 1e-6
            assert abs(seconds(span) - turn["e2e_s"]) < 1e-6
            assert a["gen_ai.response.finish_reasons"]
        tools = Counter(attrs(s)["gen_ai.tool.name"] for s in steps if s["name"].startswith("execute_tool "))
        assert tools == Counter(s["label"] for s in run["segments"] if s["kind"] == "tool")
        humans = [s for s in steps if attrs(s).get("tokrace.step.kind") == "human"]
        assert sum(seconds(s) for s in humans) == pytest.approx(run["breakdown"]["human"], abs=1e-6)


def test_ids_are_hex_unique_and_stable(tmp_path: Path) -> None:
    source = source_of(record(tmp_path / "race.jsonl", runs=2))
    first, again = spans_of(to_otlp(source)), spans_of(to_otlp(source))
    assert [s["spanId"] for s in first] == [s["spanId"] for s in again]
    assert len({s["spanId"] for s in first}) == len(first)
    assert len({s["traceId"] for s in first}) == 3 * 2  # a trace per lane and run
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in first)
    assert all(int(s["traceId"], 16) and int(s["spanId"], 16) for s in first)


def test_times_start_at_the_recording_and_a_failure_is_an_error_status(tmp_path: Path) -> None:
    path = record(tmp_path / "race.jsonl", failing_tiers())
    source = source_of(path)
    spans = spans_of(to_otlp(source))
    assert min(int(s["startTimeUnixNano"]) for s in spans) == round(source.start_unix() * 1e9) > 0
    failed = [s for s in spans if s["status"]["code"] == 2]
    assert {s["name"] for s in failed} == {"invoke_agent Sol priority", "chat gpt-5.6-sol"}
    assert all(s["status"]["message"] for s in failed)


TRACE_KIND = {"connect": "model", "pending": "model", "think": "model", "model": "model", "tool": "tool",
              "human": "human", "retry": "retry", "wait": "wait"}
"""A loop's segment kinds as the trace model's step kinds: the whole model call (connecting, waiting for the first
token, thinking, streaming) is one model step; ``wait`` means the same in both (a plain wait, never the model's)."""


def as_trace_breakdown(run: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for kind, seconds in run["breakdown"].items():
        out[TRACE_KIND[kind]] = out.get(TRACE_KIND[kind], 0.0) + seconds
    return {k: v for k, v in out.items() if v > 1e-6}


@pytest.mark.parametrize(("scenario", "runs"), [("incident", 1), ("coding-loop", 1), (None, 2)])
def test_the_trace_reader_reads_it_back_with_the_same_e2e_and_breakdown(tmp_path: Path, scenario: str | None,
                                                                        runs: int) -> None:
    from tokrace.providers.traces.analysis import analyse
    from tokrace.providers.traces.read import read_file

    path = record(tmp_path / "race.jsonl", scenario=scenario, runs=runs)
    source = source_of(path)
    out = tmp_path / "race.otlp.json"
    out.write_text(to_otlp_json(source), encoding="utf-8")
    found = read_file(out)
    assert found.format == "otlp" and found.problem is None
    assert len(found.traces) == runs * len(source.tiers)
    traces = iter(found.traces)
    for run in range(runs):
        for metrics in (lane[run] for lane in source.result.metrics):
            trace = next(traces)
            assert trace.skipped == 0
            got = analyse(trace)
            want = metrics.to_json()
            if scenario is None:  # a single prompt is a loop of one turn: its time is all the model's
                want["breakdown"] = {"model": want["e2e_s"]}
            else:
                want["breakdown"] = as_trace_breakdown(want)
            assert got.e2e_s == pytest.approx(want["e2e_s"], abs=1e-6)
            assert {k: v for k, v in got.breakdown.items() if v > 1e-6} == pytest.approx(want["breakdown"], abs=1e-5)
            assert got.calls == len(want.get("turns", [want]))
            assert got.output_tokens == want["output_tokens"]
            assert got.ttft_p50 is not None


def test_a_retry_back_off_reads_back_as_a_retry_and_the_call_after_it_as_the_model(tmp_path: Path) -> None:
    from tokrace.providers.model.events import Delta, Done, Headers, Request, Segment, Usage
    from tokrace.providers.model.tiers import TierSpec
    from tokrace.providers.recording import Recorder
    from tokrace.providers.traces.analysis import analyse
    from tokrace.providers.traces.read import read_file

    path = tmp_path / "retry.jsonl"
    recorder = Recorder(path, "Why?", [TierSpec(name="flaky", provider="openai", model="m")])
    for event in (Request(t=0.0, model="m"), Segment(t=0.0, seg="retry", start=0.0, end=0.6, label="HTTP 429"),
                  Headers(t=0.7), Delta(t=0.9, text="Because ", tokens=2), Delta(t=1.2, text="it is.", tokens=2),
                  Usage(t=1.5, input=10, output=4), Done(t=1.5)):
        recorder(0, event)
    recorder.close()
    out = tmp_path / "retry.otlp.json"
    out.write_text(to_otlp_json(source_of(path)), encoding="utf-8")
    [trace] = read_file(out).traces
    got = analyse(trace)
    assert got.e2e_s == pytest.approx(1.5)
    assert got.breakdown == pytest.approx({"model": 0.9, "retry": 0.6, "tool": 0.0, "human": 0.0, "wait": 0.0})
    assert got.ttft_p50 == pytest.approx(0.3)  # from the attempt that answered


def test_each_trace_read_back_is_named_after_its_lane(tmp_path: Path) -> None:
    from tokrace.providers.traces.read import read_file

    out = tmp_path / "race.otlp.json"
    out.write_text(to_otlp_json(source_of(record(tmp_path / "race.jsonl", runs=2))), encoding="utf-8")
    assert [t.session for t in read_file(out).traces] == [
        f"{name} (run {run})" for run in (1, 2) for name in ("Sol standard", "Sol priority", "Sol ultrafast")]


def test_runs_follow_one_another_in_time(tmp_path: Path) -> None:
    source = source_of(record(tmp_path / "race.jsonl", runs=2))
    agents = [s for s in spans_of(to_otlp(source)) if s["name"].startswith("invoke_agent ")]
    first, second = agents[:3], agents[3:]
    assert min(int(s["startTimeUnixNano"]) for s in second) >= max(int(s["endTimeUnixNano"]) for s in first)
