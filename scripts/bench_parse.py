"""Parse benchmark: the CPU an HTTP lane spends per token from the response's bytes to the live model.

Builds each protocol's stream (OpenAI Chat, OpenAI Responses, Anthropic) with the frames ``tokrace serve`` sends,
one text piece per token, and feeds it in chunks through the reading half of an HTTP provider (``read_events``: SSE
parsing, the protocol's decoder, stamping), the race's per-event masking, and a live lane counting tokens with
tiktoken, as the screen does. No network and no screen: what is measured is this process's CPU time
(``time.process_time``) per token, best of a few runs. Chunks hold one event each (as at low rates), several
(as at high rates), or cut at arbitrary byte boundaries.

Goal (issue 12): per token, a few microseconds in these layers.

    python scripts/bench_parse.py [--tokens 20000] [--runs 5] [--per-chunk 1,8,100,0] [--stage all|parse|live]
                                  [--text passage|varied|both]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from tokrace.providers.adapters.http import AnthropicProvider, HTTPProvider, OpenAIChatProvider, OpenAIResponsesProvider
from tokrace.providers.adapters.http.read_loop import TurnLimits, read_events
from tokrace.providers.adapters.synthetic import PASSAGE, pieces
from tokrace.providers.model.events import Delta, Event
from tokrace.providers.model.masking import Masker
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.model.tokens import get_encoding
from tokrace.providers.race.live import LiveLane
from tokrace.providers.serve.wire import AnthropicWire, ChatWire, Piece, Plan, ResponsesWire, Timing, Wire
from tokrace.providers.timing.clock import LaneClock, RealClock

PROTOCOLS: dict[str, tuple[type[HTTPProvider], type[Wire]]] = {
    "openai": (OpenAIChatProvider, ChatWire),
    "openai-responses": (OpenAIResponsesProvider, ResponsesWire),
    "anthropic": (AnthropicProvider, AnthropicWire),
}


def texts(n: int, varied: bool) -> list[str]:
    """``n`` text pieces: the synthetic passage over and over (what ``tokrace serve`` and the demo send), or
    (``varied``) its pieces drawn at random, so that the text, like a real answer, hardly ever repeats."""
    passage = pieces(PASSAGE)
    if varied:
        rng = random.Random(1)
        return [rng.choice(passage) for _ in range(n)]
    return list(itertools.islice(itertools.cycle(passage), n))


def frames(wire_type: type[Wire], n: int, varied: bool = False) -> list[bytes]:
    """One response's SSE frames: its opening, ``n`` text pieces, its closing."""
    texts_ = texts(n, varied)
    plan = Plan(head_t=0.0, pieces=[Piece(0.0, text) for text in texts_], end_t=0.0, input_tokens=10,
                output_tokens=n)
    wire = wire_type({"stream_options": {"include_usage": True}}, "bench", "bench-model", "default", True)
    return [wire.opening(plan), *(wire.piece(plan, p) for p in plan.pieces), wire.closing(plan, Timing(0.0))]


def chunked(parts: list[bytes], per_chunk: int) -> list[bytes]:
    """``per_chunk`` frames per chunk; 0 cuts the bytes every 97 bytes instead (events split across chunks)."""
    if per_chunk == 0:
        whole = b"".join(parts)
        return [whole[i:i + 97] for i in range(0, len(whole), 97)]
    return [b"".join(parts[i:i + per_chunk]) for i in range(0, len(parts), per_chunk)]


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


async def _run(provider: HTTPProvider, chunks: list[bytes], stage: str, encoding: object) -> tuple[float, int]:
    """CPU seconds for one response, and its text deltas."""
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Chunks(chunks))
    real = RealClock()
    clock = LaneClock(real, real.now())  # a lane's clock, as the race gives it: seconds since the lane began
    limits = TurnLimits(1800.0, sum(chunk.count(b"\n\n") for chunk in chunks))  # max_tokens: its events
    masker = Masker([], shapes=True)
    lane = LiveLane(TierSpec(name="bench", provider=provider.name, model="bench-model"))
    lane.set_encoding("cl100k_base", encoding)
    deltas = 0
    started = time.process_time()
    if stage == "live":
        events: list[Event] = [event async for event in read_events(provider, response, clock, None, 0.0, limits)]
        started = time.process_time()
        for event in events:
            lane.on_event(masker(event))
            deltas += event.chunks if isinstance(event, Delta) else 0
    elif stage == "parse":
        async for event in read_events(provider, response, clock, None, 0.0, limits):
            deltas += event.chunks if isinstance(event, Delta) else 0
    else:
        async for event in read_events(provider, response, clock, None, 0.0, limits):
            lane.on_event(masker(event))
            deltas += event.chunks if isinstance(event, Delta) else 0
    return time.process_time() - started, deltas


def measure(protocol: str, n: int, per_chunk: int, runs: int, stage: str, varied: bool = False) -> float:
    """Microseconds of CPU per token, best of ``runs``."""
    provider_type, wire_type = PROTOCOLS[protocol]
    base_url = "http://127.0.0.1:9" + ("" if protocol == "anthropic" else "/v1")
    tier = TierSpec(name="bench", provider=protocol, model="bench-model", base_url=base_url)
    provider = provider_type(tier)
    chunks = chunked(frames(wire_type, n, varied), per_chunk)
    _, encoding = get_encoding("bench-model")
    best = float("inf")
    for _ in range(runs):
        seconds, deltas = asyncio.run(_run(provider, chunks, stage, encoding))
        assert deltas == n, (protocol, deltas, n)
        best = min(best, seconds / n)
    return best * 1e6


def _modes(text: str) -> Iterator[int]:
    for part in text.split(","):
        yield int(part)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--per-chunk", default="1,8,100,0",
                        help="events per chunk, comma-separated (100: a paced read at 12k tok/s); 0 = 97-byte cuts")
    parser.add_argument("--stage", choices=("all", "parse", "live"), default="all",
                        help="all: bytes to live lane; parse: bytes to events; live: masking + live lane only")
    parser.add_argument("--text", choices=("passage", "varied", "both"), default="both",
                        help="passage: the demo's passage over and over (counted from the tokenizer's memo after "
                             "two rounds); varied: pieces at random, as a real answer (the tokenizer on every "
                             "piece)")
    args = parser.parse_args()
    modes = list(_modes(args.per_chunk))
    label = {0: "97-byte cuts"}
    for text in (("passage", "varied") if args.text == "both" else (args.text,)):
        print(f"µs of CPU per token ({args.stage}, {text} text, {args.tokens:,} tokens, best of {args.runs})")
        print(f"{'protocol':18}" + "".join(f"{label.get(m, f'{m} event/chunk'):>16}" for m in modes))
        for protocol in PROTOCOLS:
            figures = [measure(protocol, args.tokens, m, args.runs, args.stage, text == "varied") for m in modes]
            print(f"{protocol:18}" + "".join(f"{f:16.2f}" for f in figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
