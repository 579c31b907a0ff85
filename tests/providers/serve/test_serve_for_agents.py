"""``tokrace serve`` as a real agent's upstream: an answer ends as a model's does, whatever limit the agent allows,
and a large conversation's input tokens are counted once per text, off the stream's way."""

from __future__ import annotations

import json

import httpx
from serving import fast_source

from tokrace.providers.serve import ServeServer, sources


async def test_an_agent_allowing_32000_tokens_gets_an_answer_that_ends_with_end_turn() -> None:
    body = {"model": "m", "stream": True, "max_tokens": 32_000, "messages": [{"role": "user", "content": "hello"}]}
    async with ServeServer(fast_source()) as server, httpx.AsyncClient() as client:
        response = await client.post(server.url + "/v1/messages", json=body)
        small = await client.post(server.url + "/v1/messages", json={**body, "max_tokens": 5})
    deltas = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    stop = next(d for d in deltas if d["type"] == "message_delta")
    assert stop["delta"]["stop_reason"] == "end_turn" and stop["usage"]["output_tokens"] == 400
    assert '"stop_reason": "max_tokens"' in small.text or '"stop_reason":"max_tokens"' in small.text


def test_a_long_text_is_counted_once_and_counted_the_same() -> None:
    text = "a conversation that an agent sends again with every request. " * 200
    sources._COUNTS.clear()
    first = sources._input_tokens({"messages": [{"role": "user", "content": text}]})
    assert {text: first} == sources._COUNTS
    sources._COUNTS[text] = -1  # the second count comes from what was kept
    assert sources._input_tokens({"messages": [{"role": "user", "content": text}]}) == -1
    sources._COUNTS.clear()
