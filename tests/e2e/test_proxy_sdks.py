"""The official openai and anthropic Python SDKs through ``tokrace proxy`` to ``tokrace serve``: the same stream as
direct, byte for byte (but for the ids and times the server makes afresh per request), and each call recorded.
Opt-in: skipped when the SDKs are not installed (``pip install openai anthropic``)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from serving import fast_source, serve_in_thread

from tokrace.providers.model.events import Done, Request
from tokrace.providers.proxy import Routes, Upstream
from tokrace.providers.proxy.session import ProxySession
from tokrace.providers.recording import read_recording

openai = pytest.importorskip("openai", reason="the openai SDK is not installed (pip install openai)")
anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK is not installed (pip install anthropic)")

FRESH = re.compile(rb'"(id|created|created_at|request_id)":\s*("[^"]*"|\d+)|(chatcmpl|resp|msg|req|fc|call|toolu)'
                   rb'_[A-Za-z0-9]+')
"""What the server makes afresh for each request (ids, times): the only bytes direct and proxied may differ in."""


@contextmanager
def proxy_in_thread(upstream: str, record: Path) -> Iterator[ProxySession]:
    loop = asyncio.new_event_loop()
    session = ProxySession(Routes.single(Upstream.parse(upstream)), record)
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(session.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(5)
    try:
        yield session
    finally:
        asyncio.run_coroutine_threadsafe(session.close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


TOOLS_CHAT = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
TOOLS_ANTHROPIC = [{"name": "read", "input_schema": {"type": "object"}}]
TOOLS_RESPONSES = [{"type": "function", "name": "read", "parameters": {"type": "object"}}]


def chat(base: str) -> bytes:
    client = openai.OpenAI(base_url=base + "/v1", api_key="sk-test-key-123456", max_retries=0)
    with client.chat.completions.with_streaming_response.create(
            model="m", stream=True, stream_options={"include_usage": True}, tools=TOOLS_CHAT,  # type: ignore[arg-type]
            messages=[{"role": "user", "content": "hi"}]) as response:
        return b"".join(response.iter_bytes())


def responses(base: str) -> bytes:
    client = openai.OpenAI(base_url=base + "/v1", api_key="sk-test-key-123456", max_retries=0)
    with client.responses.with_streaming_response.create(model="m", stream=True, input="hi",
                                                         tools=TOOLS_RESPONSES) as response:  # type: ignore[arg-type]
        return b"".join(response.iter_bytes())


def messages(base: str) -> bytes:
    client = anthropic.Anthropic(base_url=base, api_key="sk-ant-test-key-123456", max_retries=0)
    with client.messages.with_streaming_response.create(
            model="m", stream=True, max_tokens=40, tools=TOOLS_ANTHROPIC,  # type: ignore[arg-type]
            messages=[{"role": "user", "content": "hi"}]) as response:
        return b"".join(response.iter_bytes())


@pytest.mark.parametrize("call", [chat, responses, messages], ids=["chat", "responses", "messages"])
def test_an_sdk_gets_the_same_stream_through_the_proxy_as_direct(call: Callable[[str], bytes],
                                                                 tmp_path: Path) -> None:
    record = tmp_path / "sdk.jsonl"
    with serve_in_thread(fast_source()) as server, proxy_in_thread(server.url, record) as session:
        direct = call(server.url)
        proxied = call(session.server.url)
    assert direct.count(b"data:") > 3
    assert FRESH.sub(b"", proxied) == FRESH.sub(b"", direct)
    events = [e for lane in read_recording(record).events.values() for e in lane]
    assert sum(isinstance(e, Request) for e in events) == 1 and sum(isinstance(e, Done) for e in events) == 1
