"""A made-up proxied session on a virtual clock, as the proxy's book emits it: for the live screen's screenshot and
tests (nothing in it was measured)."""

from __future__ import annotations

from typing import Final

from ..model.events import Delta, Done, Event, Extra, Headers, Request, Segment, Usage

STREAMED: Final[str] = (
    "The parser dropped the last field when a line ended without a newline. I changed split_fields to keep a "
    "trailing field and added a test for a file whose last line has no newline. Running the tests again: all 41 "
    "pass, including the new one. Next I will look at the quoting case the issue mentions.")
"""The words of the call still streaming."""


def demo_session(until: float, first_text: str = "Reading the failing test in tests/test_parser.py",
                 ) -> list[tuple[int, Event]]:
    """The session up to ``until`` seconds: a main lane (a call that asks for a tool, the tool, a call that ends the
    turn, the person, a call still streaming) and a side lane on a small model; ``first_text`` is the first answer's."""
    out: list[tuple[int, Event]] = []

    def call(lane: int, start: float, ttft: float, tokens: int, rate: float, stop: str, model: str,
             text: str) -> float:
        out.append((lane, Request(t=start, turn=0, model=model, endpoint="/v1/messages")))
        out.append((lane, Headers(t=start + ttft * 0.6, status=200, request_id="req_1")))
        words = text.split()
        for i in range(tokens):
            out.append((lane, Delta(t=start + ttft + i / rate, text=words[i % len(words)] + " ", tokens=1)))
        end = start + ttft + tokens / rate
        out.append((lane, Usage(t=end, input=12_000, output=tokens)))
        out.append((lane, Done(t=end, finish_reason=stop)))
        return end

    def opened(lane: int, t: float, model: str) -> None:
        out.append((lane, Extra(t=t, source="proxy", data={"session": "s-1", "session_number": 1, "model": model,
                                                          "agent": "claude-cli/2.0", "upstream": "http://up"})))

    opened(0, 0.0, "claude-sonnet")
    end = call(0, 0.0, 1.2, 120, 60.0, "tool_calls", "claude-sonnet", first_text)
    out.append((0, Segment(t=end + 4.0, seg="tool", start=end, end=end + 4.0, label="tool")))
    opened(1, 1.0, "claude-haiku")
    call(1, 1.0, 0.4, 20, 120.0, "stop", "claude-haiku", "Fix parser test")
    end = call(0, end + 4.0, 0.9, 200, 55.0, "stop", "claude-sonnet", "The parser now keeps the last field")
    out.append((0, Segment(t=end + 6.0, seg="human", start=end, end=end + 6.0, label="human")))
    start = end + 6.0
    out.append((0, Request(t=start, turn=0, model="claude-sonnet", endpoint="/v1/messages")))
    out.append((0, Headers(t=start + 0.5, status=200, request_id="req_2")))
    words = STREAMED.split()
    out += [(0, Delta(t=start + 0.8 + i / 50.0, text=words[i % len(words)] + " ", tokens=1)) for i in range(2000)]
    return sorted((item for item in out if item[1].t <= until), key=lambda item: item[1].t)
