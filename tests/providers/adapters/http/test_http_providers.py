"""The three HTTP providers over real loopback HTTP against ``tokrace serve``: text, reasoning, tool calls, usage,
the service tier asked for and got, the providers' own timing, and the requests they send."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import PROTOCOLS, chunks, fast_source, stream_turn, text_of, tier

from tokrace.providers.adapters import create_provider, provider_options
from tokrace.providers.adapters.http import HTTPProvider
from tokrace.providers.adapters.synthetic import PASSAGE, pieces
from tokrace.providers.metrics.turn import turn_metrics
from tokrace.providers.model.errors import ConfigError
from tokrace.providers.model.events import Delta, Done, Error, Extra, Headers, Request, Segment, ToolCall, Usage
from tokrace.providers.model.messages import Message, TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.recording import Recorder
from tokrace.providers.serve import RecordingSource, ServeServer


@pytest.fixture
async def server() -> AsyncIterator[ServeServer]:
    async with ServeServer(fast_source()) as s:
        yield s


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_each_protocol_streams_the_answer_then_usage_then_done(server: ServeServer, protocol: str) -> None:
    events = await stream_turn(tier(server, protocol))
    assert isinstance(events[0], Request) and events[0].endpoint.startswith(server.url)
    assert isinstance(events[1], Segment) and events[1].seg == "connect"
    assert isinstance(events[2], Headers) and events[2].status == 200 and events[2].request_id
    assert text_of(events) == "".join(pieces(PASSAGE)[:20])
    usage = [e for e in events if isinstance(e, Usage)][-1]
    assert usage.output == 20
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "length"
    assert [e.t for e in events] == sorted(e.t for e in events)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_each_protocol_reports_tokens_from_usage(server: ServeServer, protocol: str) -> None:
    metrics = turn_metrics(await stream_turn(tier(server, protocol)))
    assert metrics.ok and metrics.tokens_source == "usage" and metrics.output_tokens == 20
    assert metrics.ttft_s is not None and metrics.connect_s <= metrics.ttft_s


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_reasoning_streams_on_its_own_channel_before_the_answer(protocol: str) -> None:
    async with ServeServer(fast_source(thinking_tokens=6)) as server:
        events = await stream_turn(tier(server, protocol))
    deltas = chunks(events)
    assert [d.channel for d in deltas[:6]] == ["reasoning"] * 6
    assert {d.channel for d in deltas[6:]} == {"content"}
    assert text_of(events, "reasoning").startswith("The question asks")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_tier_the_server_reports_is_shown_beside_the_one_asked_for(protocol: str) -> None:
    async with ServeServer(fast_source(), report_tier="default") as server:
        spec = tier(server, protocol)
        spec.service_tier = "priority"
        events = await stream_turn(spec)
    extras = [e for e in events if isinstance(e, Extra) and e.source == "service_tier"]
    assert extras and extras[0].data == {"asked": "priority", "got": "default"}


def tool_recording(path: Path) -> Path:
    """A recorded turn that calls a tool, its arguments streamed in pieces."""
    recorder = Recorder(path, "What time is it?", [TierSpec(name="lane", provider="openai", model="m")])
    for event in (Request(t=0.0), Segment(t=0.001, seg="connect", start=0.0, end=0.001),
                  Headers(t=0.002), Delta(t=0.003, text="Let me check."),
                  Delta(t=0.004, text='{"tz": ', channel="tool_args"),
                  Delta(t=0.005, text='"UTC"}', channel="tool_args"),
                  ToolCall(t=0.005, id="call_1", name="get_time", arguments='{"tz": "UTC"}'),
                  Usage(t=0.006, input=12, output=9), Done(t=0.006, finish_reason="tool_calls")):
        recorder(0, event)
    recorder.close()
    return path


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_tool_call_arguments_stream_on_their_channel_and_end_in_a_tool_call(protocol: str,
                                                                                   tmp_path: Path) -> None:
    async with ServeServer(RecordingSource(tool_recording(tmp_path / "tool.jsonl"))) as server:
        events = await stream_turn(tier(server, protocol))
    assert text_of(events) == "Let me check."
    assert text_of(events, "tool_args") == '{"tz": "UTC"}'
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [("call_1", "get_time", {"tz": "UTC"})]
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "tool_calls"


@pytest.mark.parametrize(("flavor", "source"), [("groq", "groq"), ("cerebras", "cerebras"), ("llamacpp", "llamacpp")])
async def test_providers_own_timing_is_kept_with_the_decode_rate_it_implies(flavor: str, source: str) -> None:
    async with ServeServer(fast_source(tok_s=20_000), flavor=flavor) as server:
        events = await stream_turn(tier(server, "openai"))
    extra = next(e for e in events if isinstance(e, Extra) and e.source == source)
    assert extra.data["decode_tok_s"] > 0
    assert isinstance(events[-1], Done)


async def test_llamacpp_reasoning_content_is_the_reasoning_channel() -> None:
    async with ServeServer(fast_source(thinking_tokens=3), flavor="llamacpp") as server:
        events = await stream_turn(tier(server, "openai"))
    assert [d.channel for d in chunks(events)][:3] == ["reasoning"] * 3


async def test_warm_opens_the_connection_the_first_turn_reuses(server: ServeServer) -> None:
    prov = create_provider(tier(server, "openai"))
    await prov.prepare(warm=True)
    try:
        from tokrace.providers.timing.clock import LaneClock, RealClock

        clock = RealClock()
        events = [e async for e in prov.stream(TurnRequest("hi", max_tokens=3), LaneClock(clock, clock.now()))]
    finally:
        await prov.aclose()
    connect = next(e for e in events if isinstance(e, Segment) and e.seg == "connect")
    assert connect.label == "reused connection"


async def test_a_cold_first_turn_reports_a_new_connection(server: ServeServer) -> None:
    events = await stream_turn(tier(server, "openai"))
    connect = next(e for e in events if isinstance(e, Segment) and e.seg == "connect")
    assert connect.label == "new connection"


# -- what is sent ---------------------------------------------------------------------------------------------

CONVERSATION = [
    Message("system", "Be brief."),
    Message("user", "What time is it?"),
    Message("assistant", "Checking.", {"tool_calls": [{"id": "c1", "name": "get_time", "arguments": '{"tz":"UTC"}'}]}),
    Message("tool", "12:00", {"tool_call_id": "c1", "name": "get_time"}),
]
TOOLS = [{"name": "get_time", "description": "The time now.",
          "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}]


async def sent_request(spec: TierSpec, request: TurnRequest | None = None) -> httpx.Request:
    """The request a provider sends (the network replaced by a transport that answers 400)."""
    seen: list[httpx.Request] = []

    def answer(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(400, json={"error": {"message": "no"}})

    await stream_turn(spec, request, transport=httpx.MockTransport(answer))
    return seen[0]


def body(req: httpx.Request) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(req.content)
    return data


async def test_chat_sends_usage_option_tier_effort_tools_and_the_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-chat")
    spec = TierSpec(name="x", provider="openai", model="gpt-5.6-sol", service_tier="priority",
                    options={"reasoning_effort": "low", "headers": {"OpenAI-Project": "p1"}})
    req = await sent_request(spec, TurnRequest("", max_tokens=50, messages=CONVERSATION, tools=TOOLS))
    assert str(req.url) == "https://api.openai.com/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test-chat" and req.headers["openai-project"] == "p1"
    sent = body(req)
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["service_tier"] == "priority" and sent["reasoning_effort"] == "low"
    assert sent["max_completion_tokens"] == 50
    assert sent["tools"][0] == {"type": "function", "function": TOOLS[0]}
    assert sent["messages"][2] == {"role": "assistant", "content": "Checking.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": '{"tz":"UTC"}'}}]}
    assert sent["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "12:00"}


async def test_chat_sends_max_tokens_to_compatible_servers_unless_told() -> None:
    spec = TierSpec(name="x", provider="openai", model="llama", base_url="http://127.0.0.1:9/v1")
    assert body(await sent_request(spec))["max_tokens"] == 20
    spec.options["max_tokens_field"] = "max_completion_tokens"
    assert body(await sent_request(spec))["max_completion_tokens"] == 20


async def test_responses_sends_flat_tools_reasoning_and_function_call_items(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-responses")
    spec = TierSpec(name="x", provider="openai-responses", model="gpt-5.6-sol", service_tier="ultrafast",
                    options={"reasoning_effort": "high", "reasoning_summary": "auto"})
    req = await sent_request(spec, TurnRequest("", max_tokens=64, messages=CONVERSATION, tools=TOOLS))
    assert str(req.url) == "https://api.openai.com/v1/responses"
    sent = body(req)
    assert sent["service_tier"] == "ultrafast" and sent["max_output_tokens"] == 64
    assert sent["reasoning"] == {"effort": "high", "summary": "auto"}
    assert sent["tools"] == [{"type": "function", **TOOLS[0]}]
    assert {"type": "function_call", "call_id": "c1", "name": "get_time", "arguments": '{"tz":"UTC"}'} in sent["input"]
    assert sent["input"][-1] == {"type": "function_call_output", "call_id": "c1", "output": "12:00"}


async def test_anthropic_sends_key_version_system_thinking_and_tool_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    spec = TierSpec(name="x", provider="anthropic", model="claude", options={"thinking_budget": 2048})
    req = await sent_request(spec, TurnRequest("", max_tokens=4096, messages=CONVERSATION, tools=TOOLS))
    assert str(req.url) == "https://api.anthropic.com/v1/messages"
    assert req.headers["x-api-key"] == "sk-ant-test" and req.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in req.headers
    sent = body(req)
    assert sent["system"] == "Be brief." and sent["max_tokens"] == 4096
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["tools"] == [{"name": "get_time", "description": "The time now.",
                              "input_schema": TOOLS[0]["parameters"]}]
    assert sent["messages"][1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "c1", "name": "get_time", "input": {"tz": "UTC"}}]}
    assert sent["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": "12:00"}]}


async def test_a_thinking_budget_not_below_max_tokens_is_a_config_error_of_the_lane() -> None:
    spec = TierSpec(name="x", provider="anthropic", model="c", base_url="http://127.0.0.1:9",
                    options={"thinking_budget": 2048})
    events = await stream_turn(spec, TurnRequest("hi", max_tokens=1000))
    assert isinstance(events[-1], Error) and events[-1].error == "config"
    assert "thinking_budget (2048) must be below max_tokens (1000)" in events[-1].message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_base_url_follows_the_official_sdks(protocol: str) -> None:
    spec = TierSpec(name="x", provider=protocol, model="m", base_url="http://h:1" + ("" if protocol == "anthropic"
                                                                                     else "/v1/"))
    endpoint = create_provider(spec).endpoint()  # type: ignore[attr-defined]
    assert endpoint == {"openai": "http://h:1/v1/chat/completions", "openai-responses": "http://h:1/v1/responses",
                        "anthropic": "http://h:1/v1/messages"}[protocol]


def test_an_anthropic_base_url_with_v1_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"without /v1.*'http://h:1'"):
        create_provider(TierSpec(name="x", provider="anthropic", base_url="http://h:1/v1"))


def test_keys_in_extra_headers_are_refused() -> None:
    with pytest.raises(ConfigError, match="api_key_env"):
        create_provider(TierSpec(name="x", provider="openai", options={"headers": {"Authorization": "Bearer x"}}))


async def test_a_missing_key_variable_is_a_config_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        await create_provider(TierSpec(name="x", provider="openai", model="m")).prepare()


async def test_a_key_where_a_long_message_is_cut_short_never_shows_even_in_part(
        monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-live-" + "a1b2c3d4" * 4
    monkeypatch.setenv("OPENAI_API_KEY", key)
    provider = create_provider(TierSpec(name="x", provider="openai", model="m"))
    await provider.prepare()
    assert isinstance(provider, HTTPProvider)
    shown = provider.clean("the server said " + "x" * 200 + f" {key} and more")  # the cut falls in the key
    assert key[:10] not in shown and "[redacted]" in shown
    await provider.aclose()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_provider_registers_its_options(protocol: str) -> None:
    options = provider_options(protocol)
    assert {"headers", "extra_body", "read_timeout_s", "max_retries"} <= set(options)


async def test_extra_body_fields_are_merged_into_the_request() -> None:
    spec = TierSpec(name="x", provider="openai", model="m", base_url="http://127.0.0.1:9/v1",
                    options={"extra_body": {"reasoning_format": "parsed"}})
    assert body(await sent_request(spec))["reasoning_format"] == "parsed"
