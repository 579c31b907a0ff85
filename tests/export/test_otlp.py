"""The OTLP export: GenAI spans (an agent per lane, a model call per turn with usage and time to first chunk, a
tool span per tool call), one trace per lane and run, stable ids."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from exporting import failing_tiers, record, replay_json, source_of

from providers.export.otlp import to_otlp, to_otlp_json


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
