"""A proxy session: calls measured at the wire, placed on their session's lane, gaps named, recorded as a tokrace
recording that `tokrace traces` reads, with no secret of the client's in it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from proxying import Upstream1, anthropic_sse, chunked, sse_response
from serving import fast_source, serve_in_thread

from tokrace.providers.model.events import Done, Error, Request, Segment
from tokrace.providers.proxy import Routes, Upstream
from tokrace.providers.proxy.http1 import parse_head
from tokrace.providers.proxy.session import ProxySession, header_secrets
from tokrace.providers.recording import read_recording
from tokrace.providers.traces.read import read_file

BODIES = {
    "/v1/chat/completions": {"model": "m", "stream": True, "stream_options": {"include_usage": True},
                             "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": "m", "stream": True, "input": "hi"},
    "/v1/messages": {"model": "m", "stream": True, "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}],
                     "metadata": {"user_id": "user_x_account_y_session_abc"}},
}


async def test_every_protocol_through_the_proxy_is_recorded_as_a_trace_with_measured_ttft(tmp_path: Path) -> None:
    path = tmp_path / "proxy.jsonl"
    with serve_in_thread(fast_source(ttft_ms=30, tok_s=2000)) as server:
        session = ProxySession(Routes.single(Upstream.parse(server.url)), path)
        await session.start()
        try:
            async with httpx.AsyncClient(base_url=session.server.url, timeout=10) as client:
                for route, body in BODIES.items():
                    async with client.stream("POST", route, json=body, headers={"x-api-key": "k"}) as response:
                        raw = b"".join([chunk async for chunk in response.aiter_raw()])
                    assert response.status_code == 200 and raw.count(b"data:") > 3
                    if route == "/v1/messages":
                        assert b"event: content_block_delta" in raw  # event: lines kept
            await asyncio.sleep(0.05)
        finally:
            await session.close()
    rec = read_recording(path)
    assert rec.header["source"] == "tokrace proxy" and not rec.warnings
    lanes = sorted(rec.events)
    assert len(lanes) == 2  # the Claude-Code-style session, and the agent without one
    events = [e for key in lanes for e in rec.events[key]]
    assert sum(isinstance(e, Request) for e in events) == 3
    assert sum(isinstance(e, Done) for e in events) == 3
    found = read_file(path)
    assert found.problem is None
    steps = [s for t in found.traces for s in t.steps if s.kind == "model"]
    assert len(steps) == 3
    assert all(s.ttft_s is not None and s.ttft_s > 0.02 and (s.output_tokens or 0) > 0 for s in steps)


async def run_calls(tmp_path: Path, answers: list[list[bytes]], bodies: list[bytes],
                    headers: dict[str, str] | None = None) -> Path:
    path = tmp_path / "calls.jsonl"
    queue = list(answers)

    def answer(request: bytes) -> list[bytes]:
        return queue.pop(0)

    async with Upstream1(answer) as up:
        session = ProxySession(Routes.single(Upstream.parse(up.url)), path)
        await session.start()
        try:
            async with httpx.AsyncClient(base_url=session.server.url, timeout=10) as client:
                for body in bodies:
                    await client.post("/v1/messages", content=body, headers=headers or {})
                    await asyncio.sleep(0.02)
            await asyncio.sleep(0.02)
        finally:
            await session.close()
    return path


async def test_gaps_are_tool_after_a_tool_call_human_after_an_end_of_turn_and_retry_on_a_repeat(
        tmp_path: Path) -> None:
    overloaded = [b"HTTP/1.1 529 Overloaded\r\ncontent-length: 2\r\nretry-after: 1\r\n\r\n{}"]
    answers = [sse_response(anthropic_sse("tool_use")), sse_response(anthropic_sse("end_turn")), overloaded,
               sse_response(anthropic_sse("end_turn"))]
    bodies = [json.dumps({"model": "m", "stream": True, "n": n}).encode() for n in (1, 2, 3, 3)]
    path = await run_calls(tmp_path, answers, bodies)
    events = read_recording(path).events[(0, 0)]
    gaps = [e.seg for e in events if isinstance(e, Segment)]
    assert gaps == ["tool", "human", "retry"]
    errors = [e for e in events if isinstance(e, Error)]
    assert [(e.error, e.status, e.retry_after) for e in errors] == [("http", 529, 1.0)]
    found = read_file(path)
    (trace,) = found.traces
    assert [s.kind for s in trace.steps] == ["model", "tool", "model", "human", "model", "retry", "model"]
    rec = read_recording(path)
    assert rec.header["scenario"] == "proxy session"  # a session is an agent loop to replay and export
    end = events[-1]
    assert end.kind == "extra" and end.data == {"scenario": "proxy session", "turns": 4}
    assert end.t == next(e for e in reversed(events) if isinstance(e, Done)).t


async def test_no_key_cookie_or_token_the_client_sends_reaches_the_recording(tmp_path: Path) -> None:
    canaries = ["canary-key-1234567890", "canary-bearer-1234567890", "canary-cookie-1234567890"]
    echo = " ".join(canaries).encode()
    answers = [sse_response(anthropic_sse("end_turn", text=" ".join(canaries))),
               [b"HTTP/1.1 401 Unauthorized\r\ncontent-length: " + str(len(echo)).encode() + b"\r\n\r\n" + echo]]
    headers = {"x-api-key": canaries[0], "authorization": f"Bearer {canaries[1]}",
               "cookie": f"a=b; sid={canaries[2]}"}
    bodies = [b'{"model":"m","stream":true}', b'{"model":"m","stream":true,"n":2}']
    path = await run_calls(tmp_path, answers, bodies, headers)
    text = path.read_text()
    assert "HTTP 401" in text
    assert not any(c in text for c in canaries)


def test_header_secrets_takes_each_credential_form() -> None:
    head = parse_head(b"POST / HTTP/1.1\r\nAuthorization: Bearer tok-123\r\nCookie: a=1; b=2\r\nx-other: 3\r\n\r\n")
    assert set(header_secrets(head)) == {"Bearer tok-123", "tok-123", "a=1; b=2", "1", "2"}


async def test_a_gzip_stream_and_a_whole_answer_are_measured_from_their_decoded_copy(tmp_path: Path) -> None:
    import gzip

    packed = gzip.compress(anthropic_sse("end_turn", text="zipped"))
    whole = json.dumps({"content": [{"type": "text", "text": "whole"}], "stop_reason": "tool_use",
                        "usage": {"input_tokens": 4, "output_tokens": 2}}).encode()
    answers = [[b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
                b"transfer-encoding: chunked\r\n\r\n", *chunked(packed[:30], packed[30:])],
               [b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                + str(len(whole)).encode() + b"\r\n\r\n" + whole]]
    path = await run_calls(tmp_path, answers, [b'{"model":"m","stream":true}', b'{"model":"m"}'])
    events = read_recording(path).events[(0, 0)]
    texts = [e.text for e in events if e.kind == "delta"]
    assert texts == ["zipped", "whole"]
    assert [e.finish_reason for e in events if isinstance(e, Done)] == ["stop", "tool_calls"]


async def test_a_body_in_a_coding_tokrace_cannot_read_is_relayed_and_timed_with_a_note(tmp_path: Path) -> None:
    answers = [[b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: x-made-up\r\n"
                b"content-length: 3\r\n\r\nabc"]]
    path = await run_calls(tmp_path, answers, [b'{"model":"m","stream":true}'])
    events = read_recording(path).events[(0, 0)]
    assert [e.kind for e in events if e.kind in ("done", "error")] == ["done"]
    notes = [e.data["notes"] for e in events if e.kind == "extra" and e.source == "proxy.note"]
    assert notes == [["the answer was a body in the 'x-made-up' coding"]]


async def test_a_br_stream_and_a_zstd_request_are_measured_from_their_decoded_copies(tmp_path: Path) -> None:
    import brotli
    import zstandard

    packed = brotli.compress(anthropic_sse("end_turn", text="squeezed"))
    answers = [[b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: br\r\n"
                b"transfer-encoding: chunked\r\n\r\n", *chunked(packed[:9], packed[9:])]]
    body = zstandard.ZstdCompressor().compress(b'{"model":"zstd-model","stream":true}')
    path = await run_calls(tmp_path, answers, [body], {"content-encoding": "zstd"})
    events = read_recording(path).events[(0, 0)]
    assert [e.text for e in events if e.kind == "delta"] == ["squeezed"]
    assert [e.model for e in events if isinstance(e, Request)] == ["zstd-model"]
    assert [(e.input, e.output) for e in events if e.kind == "usage"][-1] == (7, 3)
