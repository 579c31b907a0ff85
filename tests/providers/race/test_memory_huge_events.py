"""A misbehaving server's huge events cost a lane a small multiple of one event's size, however many come: each is
let go once handed on (never held while the next one is read and parsed), written to the recording and the lane's
log without a joined copy, and measured without holding two at once (docs/performance.md#hostile-input)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tokrace.providers.metrics import turn as metrics
from tokrace.providers.metrics.turn import turn_metrics
from tokrace.providers.model import tokens
from tokrace.providers.model.eventlog import EventLog
from tokrace.providers.model.events import Delta, Done, Event, Request
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.recording.writer import Recorder
from tokrace.providers.runs.session import run_session

SIZE = 3_000_000
"""One event's text (no word break in it: the hostile case)."""


@contextmanager
def huge_events(count: int, size: int = SIZE) -> Iterator[str]:
    """An OpenAI-compatible server on 127.0.0.1 that answers with ``count`` events of ``size`` characters each and
    the provider's own usage (so no tokenizer runs), sent from one buffer made before the test measures."""
    event = ("data: " + json.dumps({"choices": [{"delta": {"content": "y" * size}}]}) + "\n\n").encode()
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":5}}\n\ndata: [DONE]\n\n'
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(65536)
            size = int(head.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0]) if b"content-length:" in head else 0
            body = head.split(b"\r\n\r\n", 1)[1]
            while len(body) < size:
                body += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
                         + str(len(event) * count + len(usage)).encode() + b"\r\nconnection: close\r\n\r\n")
            view = memoryview(event)
            for _ in range(count):
                conn.sendall(view)
            conn.sendall(usage)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        thread.join(10)
        listener.close()


def test_a_lane_of_huge_events_costs_under_four_times_one_of_them(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    request = TurnRequest(prompt="p", max_tokens=100)
    with huge_events(1, 1000) as url:  # what a first lane imports and sets up, before anything is measured
        spec = TierSpec(name="warm", provider="openai", model="m", base_url=url, options={"max_retries": 0})
        Recorder(tmp_path / "warm.jsonl", "p", [spec]).close()
        asyncio.run(run_session([spec], request))
    tokens.count("the tokenizer, loaded")  # (it counts the first event: the decode rate leaves it out)
    count = 4
    with huge_events(count) as url:
        spec = TierSpec(name="huge", provider="openai", model="m", base_url=url, options={"max_retries": 0})
        recorder = Recorder(tmp_path / "r.jsonl", "p", [spec])
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            result = asyncio.run(run_session([spec], request, listeners=[recorder]))
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        recorder.close()
    m = result.metrics[0][0]
    assert m.ok, m.error
    assert m.tokens_source == "usage"
    assert sum(len(e.text) for e in result.runs[0][0].events if isinstance(e, Delta)) == count * SIZE
    assert peak < 4 * SIZE, f"{peak / SIZE:.2f}× one event"


def test_measuring_a_turn_of_huge_events_holds_about_two_of_them_at_most(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each was joined whole with the text before it, the log kept four read back, the scan held the first and the
    last: seven times one event."""
    monkeypatch.setattr(metrics.tokenizer, "count", lambda text, model="", end=None: (
        (len(text) if end is None else end) // 4, "fake"))
    events: list[Event] = [Request(t=0.0), *(Delta(t=1.0 + i, text="y" * SIZE) for i in range(5)), Done(t=9.0)]
    log = EventLog(events)
    del events
    tracemalloc.start()
    try:
        m = turn_metrics(log)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert m.ok and m.tokens_source == "tokenizer" and m.output_tokens > 5 * SIZE // 4 - 100
    assert peak < 2.5 * SIZE, f"{peak / SIZE:.2f}× one event"
