"""``tokrace traces`` on a proxy recording: TTFT measured at the wire, and the calls, tools and tokens the agent saw."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from proxying import Upstream1, anthropic_sse, chunked

from tokrace.providers.proxy import Routes, Upstream
from tokrace.providers.proxy.session import ProxySession
from tokrace.tui.main import main

STOPS = ["tool_use", "tool_use", "end_turn"]


def answer_for(stop: str) -> list[bytes]:
    """Message start first, then (30 ms later, the upstream's gap) the text, usage and stop."""
    sse = anthropic_sse(stop)
    cut = sse.index(b"event: content_block_delta")
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    first, rest, end = chunked(sse[:cut], sse[cut:])
    return [head + first, rest + end]


async def agent_session(path: Path) -> dict[str, int]:
    """Three calls through the proxy, two ending in a tool call; what the agent itself read off its streams."""
    answers = [answer_for(stop) for stop in STOPS]
    seen = {"calls": 0, "tool_calls": 0, "input_tokens": 0, "output_tokens": 0}
    async with Upstream1(lambda request: answers.pop(0), gap=0.03) as up:
        session = ProxySession(Routes.single(Upstream.parse(up.url)), path)
        await session.start()
        try:
            async with httpx.AsyncClient(base_url=session.server.url, timeout=10) as client:
                for n in range(len(STOPS)):
                    body = {"model": "m", "stream": True, "n": n}
                    async with client.stream("POST", "/v1/messages", json=body) as response:
                        lines = [line async for line in response.aiter_lines() if line.startswith("data: ")]
                    seen["calls"] += 1
                    for line in lines:
                        data = json.loads(line[6:])
                        if data["type"] == "message_start":
                            seen["input_tokens"] += data["message"]["usage"]["input_tokens"]
                        elif data["type"] == "message_delta":
                            seen["output_tokens"] += data["usage"]["output_tokens"]
                            seen["tool_calls"] += data["delta"]["stop_reason"] == "tool_use"
                    await asyncio.sleep(0.02)  # the tool runs
            await asyncio.sleep(0.05)
        finally:
            await session.close()
    return seen


def test_traces_on_a_proxy_recording_gives_measured_ttft_and_the_counts_the_agent_saw(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "agent.jsonl"
    seen = asyncio.run(agent_session(path))
    assert main(["traces", str(path), "--json", "-"]) == 0
    (trace,) = json.loads(capsys.readouterr().out)["traces"]
    assert {key: trace[key] for key in seen} == seen
    assert trace["notes"] == ["a recording: every figure measured"]
    p50, p90 = trace["ttft_s"]["p50"], trace["ttft_s"]["p90"]
    assert 0.025 <= p50 <= p90 < 1.0  # the upstream's 30 ms before the first token, measured at the wire
