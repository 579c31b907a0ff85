"""The live tool-call loop, per protocol, against the loopback server: the model decides, tokrace runs the
simulated tool on the lane's (virtual) clock and sends the result back in that protocol's own format."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import PROTOCOLS, fast_source, instant_backoff, tier

from tokrace.providers.adapters import FACTORIES, Provider
from tokrace.providers.loop.scenario import Scenario
from tokrace.providers.loop.scenario_file import parse_scenario
from tokrace.providers.metrics.loop import loop_metrics
from tokrace.providers.model.events import Error, Event, Request, Segment, ToolCall
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.race import LaneRun, Race
from tokrace.providers.recording import Recorder
from tokrace.providers.serve import RecordingSource, ServeServer, Source
from tokrace.providers.timing.clock import VirtualClock

LOOP = """\
name = "loop"
max_turns = 8

[[tools]]
name = "query_logs"
description = "Search the logs."
parameters = { type = "object", properties = { service = { type = "string" } }, required = ["service"] }
latency_s = 3.0
result = "pool exhausted"

[[tools]]
name = "query_metrics"
parameters = { type = "object", properties = { query = { type = "string" } } }
latency_s = { dist = "lognormal", median = 1.5, sigma = 0.3 }
result = "5xx at 12%"

[[steps]]
kind = "model"
prompt = "Checkout is failing. Why?"
calls = [{ tool = "query_logs", arguments = { service = "checkout" } },
         { tool = "query_metrics", arguments = { query = "5xx" } }]

[[steps]]
kind = "model"
calls = [{ tool = "query_logs", arguments = { service = "payments-db" }, fail = true }]

[[steps]]
kind = "model"
max_tokens = 30
"""


class Spy(httpx.AsyncBaseTransport):
    """Forwards to the real loopback server and keeps every JSON body the adapter sent."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bodies: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            self.bodies.append(json.loads(await request.aread()))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def scenario(text: str = LOOP) -> Scenario:
    return parse_scenario(text, Path("loop.toml"))


async def record_scripted(sc: Scenario, path: Path) -> list[Event]:
    """Play the scenario's script on a fast synthetic tier and record it: the loopback server's script."""
    spec = TierSpec(name="script", provider="synthetic", model="m", options={"ttft_ms": 0, "tok_s": 200_000})
    recorder = Recorder(path, "loop", [spec], scenario=sc.name)
    clock = VirtualClock()
    lanes = await clock.drive(Race([spec], TurnRequest(prompt=""), clock, [recorder], scenario=sc).run())
    recorder.close()
    return lanes[0].events


async def live_lane(source: Source, protocol: str, sc: Scenario) -> tuple[LaneRun, Spy]:
    """One live lane of ``protocol`` playing ``sc`` against a loopback server, on a virtual clock."""
    spy = Spy()
    async with ServeServer(source) as server:
        spec = tier(server, protocol)
        provider: Provider = type(FACTORIES[protocol](spec))(spec, transport=spy, backoff=instant_backoff)
        clock = VirtualClock()
        race = Race([spec], TurnRequest(prompt=""), clock, providers=[provider], scenario=sc)
        try:
            await race.prepare()
            lanes = await clock.drive(race.run())
        finally:
            await race.aclose()
    return lanes[0], spy


def tool_results(protocol: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(call id, result) of every tool result a request body sends back, read in the protocol's own format."""
    if protocol == "openai":
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    if protocol == "openai-responses":
        return [(i["call_id"], i["output"]) for i in body["input"] if i.get("type") == "function_call_output"]
    return [(b["tool_use_id"], b["content"]) for m in body["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b["type"] == "tool_result"]


def tool_calls_sent(protocol: str, body: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(id, name, arguments) of every earlier tool call a request body carries, in the protocol's format."""
    if protocol == "openai":
        return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    if protocol == "openai-responses":
        return [(i["call_id"], i["name"], json.loads(i["arguments"])) for i in body["input"]
                if i.get("type") == "function_call"]
    return [(b["id"], b["name"], b["input"]) for m in body["messages"] if m["role"] == "assistant"
            and isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]


def declared(protocol: str, body: dict[str, Any]) -> list[str]:
    if protocol == "openai":
        return [t["function"]["name"] for t in body["tools"]]
    return [t["name"] for t in body["tools"]]


def steps(events: Sequence[Event]) -> list[tuple[str, str, float]]:
    """The scenario's own spans (tools, people, waits), not the connection's."""
    return [(e.seg, e.label, round(e.end - e.start, 9)) for e in events
            if isinstance(e, Segment) and e.seg in ("tool", "human", "wait")]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_model_calls_tools_and_gets_their_results_back_in_its_protocols_format(
        protocol: str, tmp_path: Path) -> None:
    sc = scenario()
    scripted = await record_scripted(sc, tmp_path / "script.jsonl")
    lane, spy = await live_lane(RecordingSource(tmp_path / "script.jsonl"), protocol, sc)
    assert [e.kind for e in lane.events].count("request") == 3 == len(spy.bodies)
    assert steps(lane.events) == steps(scripted)
    first, second, third = spy.bodies
    assert declared(protocol, first) == ["query_logs", "query_metrics"]
    assert tool_results(protocol, first) == []
    assert tool_calls_sent(protocol, second) == [("call_0_0", "query_logs", {"service": "checkout"}),
                                                 ("call_0_1", "query_metrics", {"query": "5xx"})]
    assert tool_results(protocol, second) == [("call_0_0", "pool exhausted"), ("call_0_1", "5xx at 12%")]
    # The served recording's calls carry the script's ids, so the script's forced failure applies to them too.
    assert tool_results(protocol, third)[-1] == ("call_1_0", "the tool failed")
    calls = [(e.id, e.name) for e in lane.events if isinstance(e, ToolCall)]
    assert calls == [("call_0_0", "query_logs"), ("call_0_1", "query_metrics"), ("call_1_0", "query_logs")]
    m = loop_metrics(lane.events)
    assert m.ok, m.error
    assert len(m.turns) == 3 and m.breakdown["tool"] == pytest.approx(3.0 + 3.0)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_model_that_never_calls_a_tool_answers_in_one_request(protocol: str) -> None:
    lane, spy = await live_lane(fast_source(), protocol, scenario())
    assert len(spy.bodies) == 1
    assert not steps(lane.events) and not [e for e in lane.events if isinstance(e, ToolCall)]
    m = loop_metrics(lane.events)
    assert m.ok and len(m.turns) == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_model_that_keeps_calling_tools_is_stopped_by_the_turn_limit(protocol: str,
                                                                               tmp_path: Path) -> None:
    always = scenario(LOOP.replace("max_turns = 8", "max_turns = 2"))
    await record_scripted(always, tmp_path / "calls.jsonl")  # two turns, both calling tools: served over and over
    lane, spy = await live_lane(RecordingSource(tmp_path / "calls.jsonl"), protocol,
                                scenario(LOOP.replace("max_turns = 8", "max_turns = 5")))
    assert sum(isinstance(e, Request) for e in lane.events) == 5 == len(spy.bodies)
    last = lane.events[-1]
    assert isinstance(last, Error) and last.error == "turn_limit"
