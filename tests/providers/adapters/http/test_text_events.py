"""Text frames: an event that is the last text event's frame around a new JSON string becomes its delta without
being parsed; every stream decodes to exactly the events it decodes to when each event is parsed in full."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import AsyncIterator

import httpx
import pytest
from serving import chunks, joined, text_of

from tokrace.providers.adapters.http import AnthropicProvider, HTTPProvider, OpenAIChatProvider, OpenAIResponsesProvider
from tokrace.providers.adapters.http.decoder import StreamDecoder
from tokrace.providers.adapters.http.read_loop import TurnLimits, read_events
from tokrace.providers.adapters.http.sse import SSEEvent
from tokrace.providers.adapters.http.text_events import TextEvents
from tokrace.providers.model.events import Delta, Event
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.serve.wire import AnthropicWire, Call, ChatWire, Piece, Plan, ResponsesWire, Timing, Wire
from tokrace.providers.timing.clock import VirtualClock


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def provider_for(kind: str) -> HTTPProvider:
    if kind == "anthropic":
        return AnthropicProvider(TierSpec(name="t", provider="anthropic", model="m", base_url="http://h"))
    if kind == "openai-responses":
        return OpenAIResponsesProvider(TierSpec(name="t", provider=kind, model="m", base_url="http://h/v1"))
    return OpenAIChatProvider(TierSpec(name="t", provider="openai", model="m", base_url="http://h/v1"))


def read(provider: HTTPProvider, chunks: list[bytes], frames: bool) -> tuple[list[Event], int]:
    """The events the read loop makes of the chunks, with text frames or with every event parsed in full, and how
    many events the decoder parsed."""
    make = provider.decoder
    parsed = 0

    def decoder() -> StreamDecoder:
        d = make()
        if not frames:
            d.text_keys = ()
        feed = d.feed

        def counting(sse: SSEEvent, t: float) -> list[Event]:
            nonlocal parsed
            parsed += 1
            return feed(sse, t)

        d.feed = counting  # type: ignore[method-assign]
        return d

    provider.decoder = decoder  # type: ignore[method-assign]
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Chunks(chunks))

    async def run() -> list[Event]:
        return [e async for e in read_events(provider, response, VirtualClock(), None, 0.0)]

    events = asyncio.run(run())
    return events, parsed


PARSED: list[tuple[int, int]] = []
"""(events parsed with frames, events parsed in full) of each :func:`both`."""


def both(kind: str, chunks: list[bytes]) -> list[Event]:
    """The events of the chunks, the same with frames as parsed in full; text deltas joined as one read would join
    them (the stamps are all one on the virtual clock), so that readings of one stream in other reads compare."""
    with_frames, parsed = read(provider_for(kind), chunks, True)
    in_full, all_parsed = read(provider_for(kind), chunks, False)
    assert joined(with_frames) == joined(in_full)
    PARSED.append((parsed, all_parsed))
    return joined(with_frames)


def texts(events: list[Event]) -> list[tuple[str, str]]:
    """Each channel's text, run by run."""
    return [(e.channel, e.text) for e in events if isinstance(e, Delta)]


PIECES = [Piece(0.0, "Hi", "reasoning"), Piece(0.0, " there", "reasoning"), Piece(0.0, "The"),
          Piece(0.0, ' "quoted"'), Piece(0.0, " é\n\t"), Piece(0.0, " 😀"), Piece(0.0, "\\"), Piece(0.0, " end"),
          Piece(0.0, '{"a":', "tool_args", call=0), Piece(0.0, " 1}", "tool_args", call=0), Piece(0.0, " after")]


@pytest.mark.parametrize(("kind", "wire_type", "flavor"), [
    ("openai", ChatWire, "openai"), ("openai", ChatWire, "groq"), ("openai", ChatWire, "cerebras"),
    ("openai", ChatWire, "llamacpp"), ("anthropic", AnthropicWire, "openai"),
    ("openai-responses", ResponsesWire, "openai")])
def test_every_protocol_decodes_the_same_with_frames_one_event_per_chunk_or_cut_anywhere(
        kind: str, wire_type: type[Wire], flavor: str) -> None:
    plan = Plan(head_t=0.0, pieces=PIECES * 3, end_t=0.0, input_tokens=3, output_tokens=33,
                calls=[Call("c1", "f")], finish="tool_calls")
    wire = wire_type({"stream_options": {"include_usage": True}}, "r", "m", "default", True, flavor)
    frames = [wire.opening(plan), *(wire.piece(plan, p) for p in plan.pieces), wire.closing(plan, Timing(0.0))]
    PARSED.clear()
    events = both(kind, frames)
    assert texts(events) == texts(joined([Delta(0.0, p.text, p.channel) for p in plan.pieces]))
    parsed, all_parsed = PARSED[-1]
    assert parsed <= all_parsed - 15  # the text events after the first of each run of them (numbered ones too)
    whole = b"".join(frames)
    for size in (1, 7, 64, 1000):
        assert both(kind, [whole[i:i + size] for i in range(0, len(whole), size)]) == events


def chat(delta: dict[str, object], tier: str = "default", **extra: object) -> bytes:
    chunk = {"id": "c", "service_tier": tier, "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
             **extra}
    return b"data: " + json.dumps(chunk, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def test_a_frame_is_used_only_around_exactly_one_string() -> None:
    """Same start and end as the frame but more than a string between them (another field, a second choice), a
    changed service tier, a string with a raw control character: each is parsed in full, and says so."""
    frame_prefix = chat({"content": "a"})
    more_fields = chat({"content": "b", "role": "x"}).replace(b'"role":"x"', b'"refusal":"x"')
    events = both("openai", [
        frame_prefix, chat({"content": "b"}), more_fields, chat({"content": "c"}),
        chat({"content": "d"}, tier="flex"), chat({"content": "e"}), chat({"content": "f"}, tier="default"),
        chat({"content": ""}), chat({"content": "g"}),
        b"data: [DONE]\n\n"])
    assert [(d.channel, d.text) for d in chunks(events)][:1] == [("content", "a")]
    assert text_of(events) == "abbxcdefg" and len(chunks(events)) == 9
    tiers = [e.data["got"] for e in events if getattr(e, "source", "") == "service_tier"]  # type: ignore[attr-defined]
    assert tiers == ["default", "flex", "default"]
    raw_control = frame_prefix.replace(b'"a"', b'"a\tb"')  # JSON forbids a raw tab in a string
    broken = both("openai", [frame_prefix, chat({"content": "b"}), raw_control])
    assert broken[-1].kind == "error" and "malformed JSON" in broken[-1].message  # type: ignore[union-attr]


def test_text_that_looks_like_a_key_or_a_second_choice_is_never_taken_for_the_frame() -> None:
    sneaky = chat({"content": 'say "content":"x"'})
    second = b'data: {"choices":[{"index":1,"delta":{"content":"%s"}},{"index":0,"delta":{"content":"yes"}}]}\n\n'
    events = both("openai", [sneaky, chat({"content": "b"}), second % b"no", second % b"yes", second % b"zzz",
                             b"data: [DONE]\n\n"])
    assert texts(events)[0] == ("content", 'say "content":"x"')
    assert text_of(events) == 'say "content":"x"byesyesyes' and len(chunks(events)) == 5


def test_frames_serve_repeated_text_events_and_stop_being_kept_when_a_field_changes_every_event() -> None:
    kept = TextEvents((('"content":"', "content"),))
    first, second = SSEEvent("message", chat({"content": "a"})[6:-2].decode()), \
        SSEEvent("message", chat({"content": "b\\n"})[6:-2].decode())
    kept.learn(first, [Delta(t=0.0, text="a")])
    assert kept.text(second) == "b\\n"
    assert kept.text(SSEEvent("other", second.data)) is None  # another event type: parse it
    changing = TextEvents((('"content":"', "content"),))
    for n in range(TextEvents.GIVE_UP + 1):
        sse = SSEEvent("message", chat({"content": "x"}, nonce=str(n))[6:-2].decode())
        assert changing.text(sse) is None
        changing.learn(sse, [Delta(t=0.0, text="x")])
    assert changing.keys == () and changing.prefix is None


def read_in(kind: str, frames: list[bytes], per_read: int, max_tokens: int | None = None) -> list[Event]:
    """The read loop's events for the frames, ``per_read`` of them in each read (as a socket read brings several at
    high rates)."""
    provider = provider_for(kind)
    reads = [b"".join(frames[i:i + per_read]) for i in range(0, len(frames), per_read)]
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Chunks(reads))
    limits = TurnLimits(1e9, max_tokens) if max_tokens is not None else None

    async def run() -> list[Event]:
        return [e async for e in read_events(provider, response, VirtualClock(), None, 0.0, limits)]

    return asyncio.run(run())


TEXTS = [Piece(0.0, t) for t in ("Hi", " there", ' "quoted"', " é\n\t", " 😀", "\\", " \u2028", " end", "HIGH",
                                 "LOW", " x")]
"""Pieces of text, two of them to become the halves of a surrogate pair, each in an event of its own."""


def wire_frames(wire_type: type[Wire], pieces: list[Piece], flavor: str = "openai") -> list[bytes]:
    plan = Plan(head_t=0.0, pieces=pieces, end_t=0.0, input_tokens=3, output_tokens=len(pieces))
    wire = wire_type({"stream_options": {"include_usage": True}}, "r", "m", "default", True, flavor)
    frames = [wire.opening(plan), *(wire.piece(plan, p) for p in plan.pieces), wire.closing(plan, Timing(0.0))]
    return [f.replace(b'"HIGH"', b'"\\ud83d"').replace(b'"LOW"', b'"\\ude00"') for f in frames]


def texts_of(pieces: list[Piece]) -> list[str]:
    return [{"HIGH": "\ud83d", "LOW": "\ude00"}.get(p.text, p.text) for p in pieces]


@pytest.mark.parametrize(("kind", "wire_type"), [("openai", ChatWire), ("anthropic", AnthropicWire),
                                                 ("openai-responses", ResponsesWire)])
@pytest.mark.parametrize("per_read", [2, 5, 1000])
def test_the_text_events_of_one_read_are_one_delta_of_their_chunks_with_the_same_text(
        kind: str, wire_type: type[Wire], per_read: int) -> None:
    frames = wire_frames(wire_type, TEXTS * 4)
    one_by_one = read_in(kind, frames, 1)
    together = read_in(kind, frames, per_read)
    assert joined(together) == joined(one_by_one)
    assert [d.text for d in chunks(one_by_one)] == texts_of(TEXTS * 4)
    deltas = [e for e in together if isinstance(e, Delta)]
    assert deltas[0].text == "Hi" and deltas[0].chunks == 1  # the turn's first stays alone
    assert sum(d.chunks for d in deltas) == len(TEXTS) * 4
    if per_read == 1000:
        assert len(deltas) == 2 and deltas[1].chunks == len(TEXTS) * 4 - 1


def test_a_read_in_the_frame_is_parsed_in_one_pass_and_anything_else_event_by_event() -> None:
    frames = wire_frames(ChatWire, TEXTS * 4)
    kept = TextEvents(OpenAIChatProvider.decoder(provider_for("openai")).text_keys)  # type: ignore[arg-type]
    first = frames[1][6:-2].decode()
    kept.learn(SSEEvent("message", first), [Delta(0.0, "Hi")])
    body = b"".join(frames[2:-1])
    assert kept.whole(body) == texts_of(TEXTS * 4)[1:]
    assert kept.whole(body + b": keep-alive\n\n") is None  # a comment
    assert kept.whole(body.replace(b"data: ", b"data:", 1)) is None
    assert kept.whole(body + chat({"content": ""})) is None  # an empty text: the decoder says what it means
    assert kept.whole(body.replace(b'" end"', b'"\\q end"', 1)) is None  # a bad escape: the JSON scanner refuses it
    assert kept.whole(body.replace(b"Hi", b"\xff", 1)) is None  # not UTF-8
    assert kept.whole(frames[2].replace(b"\n\n", b"\r\n\r\n")) is None


@pytest.mark.parametrize("per_read", [1, 7, 1000])
def test_text_past_max_tokens_ends_the_turn_at_the_same_chunk_however_the_reads_fall(per_read: int) -> None:
    frames = wire_frames(ChatWire, [Piece(0.0, "w")] * 400)
    events = read_in("openai", frames, per_read, max_tokens=10)
    assert len(chunks(events)) == 296 and events[-1].kind == "error"
    assert "far past max_tokens (297 text chunks for max_tokens 10)" in events[-1].message  # type: ignore[union-attr]


def test_a_bad_event_in_a_read_keeps_the_text_before_it() -> None:
    frames = wire_frames(ChatWire, [Piece(0.0, "a")] * 10)
    frames[6] = frames[6].replace(b'"a"', b'"a\tb"')  # a raw tab: malformed JSON
    events = read_in("openai", frames, 1000)
    assert text_of(events) == "a" * 5 and len(chunks(events)) == 5 and events[-1].kind == "error"
    assert "malformed JSON" in events[-1].message  # type: ignore[union-attr]


def test_openais_padding_and_event_numbers_change_every_event_and_the_frame_still_serves() -> None:
    """Chat and Responses chunks carry random padding (``obfuscation``), Responses events a ``sequence_number``:
    values no decoder reads, held as wildcards in the frame, so such a stream is read without parsing, per event
    and a whole read at a time, to the same events as parsed in full."""
    rng = random.Random(5)
    words = [" a", " bb", ' "q"', " é", "\\", " end"]

    def padded(text: str, n: int) -> bytes:
        pad = "".join(rng.choice("abcXYZ019") for _ in range(rng.randint(1, 12)))
        return chat({"content": text}, obfuscation=pad)

    frames = [padded(w, n) for n, w in enumerate(words * 5)] + [b"data: [DONE]\n\n"]
    PARSED.clear()
    events = both("openai", frames)
    assert text_of(events) == "".join(words * 5)
    assert PARSED[-1][0] == 3  # the first (it also says the tier), the second, [DONE]: the rest through the frame
    together = read_in("openai", frames, 1000)
    assert joined(together) == events
    assert [d.chunks for d in together if isinstance(d, Delta)] == [1, len(words) * 5 - 1]
    numbered = [b"event: response.output_text.delta\ndata: " + json.dumps(
        {"type": "response.output_text.delta", "sequence_number": n, "item_id": "m", "output_index": 0,
         "content_index": 0, "delta": w, "logprobs": [], "obfuscation": "x" * (n % 7)},
        separators=(",", ":")).encode() + b"\n\n" for n, w in enumerate(words * 5, start=3)]
    PARSED.clear()
    events = both("openai-responses", numbered)
    assert text_of(events) == "".join(words * 5) and PARSED[-1][0] == 1
    assert joined(read_in("openai-responses", numbered, 7)) == events
    kept = TextEvents((('"content":"', "content"),))
    kept.learn(SSEEvent("message", padded("a", 0)[6:-2].decode()), [Delta(t=0.0, text="a")])
    assert kept.text(SSEEvent("message", chat({"content": "b"}, obfuscation="1")[6:-2].decode())) == "b"
    assert kept.text(SSEEvent("message", chat({"content": "b"}, obfuscation=1)[6:-2].decode())) is None
    assert kept.text(SSEEvent("message", chat({"content": "b"}, obfuscation="1", x=1)[6:-2].decode())) is None
    assert kept.whole(chat({"content": "b"}, obfuscation="q") + chat({"content": "c"}, obfuscation="")) == ["b", "c"]


@pytest.mark.parametrize(("kind", "wire_type"), [("openai", ChatWire), ("anthropic", AnthropicWire),
                                                 ("openai-responses", ResponsesWire)])
def test_a_read_holding_reasoning_then_answer_is_one_delta_per_channel_run(kind: str, wire_type: type[Wire]) -> None:
    pieces = [Piece(0.0, f" r{i}", "reasoning") for i in range(6)] + [Piece(0.0, f" c{i}") for i in range(5)]
    frames = wire_frames(wire_type, pieces)
    events = read_in(kind, [b"".join(frames[:2]), b"".join(frames[2:])], 1)
    deltas = [(d.channel, d.text, d.chunks) for d in events if isinstance(d, Delta)]
    assert deltas == [("reasoning", " r0", 1), ("reasoning", " r1 r2 r3 r4 r5", 5),
                      ("content", " c0 c1 c2 c3 c4", 5)]


def test_a_read_ending_inside_an_event_is_parsed_in_one_pass_up_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read capped by its size (or a packet cut) ends inside an event: the whole events before it are still one
    pass and one delta, and the rest waits for the next read, which ends that event event by event and takes the
    whole events after it in one pass again (another delta at the same stamp)."""
    frames = wire_frames(ChatWire, [Piece(0.0, f" w{i}") for i in range(40)])
    whole = b"".join(frames[2:-1])
    reads = [b"".join(frames[:2]), whole[:1000], whole[1000:2500], whole[2500:], frames[-1]]
    one_by_one = TextEvents.text
    looked: list[int] = []
    monkeypatch.setattr(TextEvents, "text", lambda self, sse: looked.append(1) or one_by_one(self, sse))
    events = read_in("openai", reads, 1)
    events_in = b"".join(frames).count(b"\n\n")
    # event by event: the first read's, the one event each read that began inside it ends, and the last read's
    assert len(looked) == reads[0].count(b"\n\n") + 2 + reads[-1].count(b"\n\n") < events_in
    assert joined(events) == joined(read_in("openai", frames, 1))
    deltas = [d for d in events if isinstance(d, Delta)]
    first, *rest = (text.count(b"\n\n") for text in _complete(reads[1:4]))
    assert [d.chunks for d in deltas] == [1, first, *itertools.chain.from_iterable((1, n - 1) for n in rest)]


def _complete(reads: list[bytes]) -> list[bytes]:
    """The part of each read that completes events (from its first whole event's start to its last one's end)."""
    out, carry = [], b""
    for read in reads:
        data = carry + read
        cut = data.rfind(b"\n\n") + 2
        out.append(data[:cut])
        carry = data[cut:]
    return out
