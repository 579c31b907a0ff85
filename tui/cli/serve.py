"""``tokrace serve``: the command-line shell over :mod:`tokrace.providers.serve` (a loopback OpenAI/Anthropic-compatible
endpoint that streams a recording or a synthetic profile with faithful timing, faults on demand)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokrace.providers.adapters.synthetic import Profile
from tokrace.providers.model.errors import ConfigError
from tokrace.providers.serve import (
    FAULT_HEADER,
    FAULT_KINDS,
    FLAVORS,
    MAX_BODY,
    Fault,
    Limits,
    RecordingSource,
    Served,
    ServeError,
    ServeServer,
    Source,
    SyntheticSource,
)


def add_serve_parser(sub: Any) -> None:
    """The ``serve`` subcommand and its options."""
    faults = "; ".join(f"{k}: {v}" for k, v in FAULT_KINDS.items())
    serve = sub.add_parser(
        "serve", help="a loopback OpenAI/Anthropic-compatible endpoint with faithful timing (for testing clients)",
        description="Serve OpenAI Chat Completions (POST /v1/chat/completions), Responses (POST /v1/responses) "
                    "and Anthropic Messages (POST /v1/messages) streaming on a loopback port, from a recording's "
                    "lane or a synthetic profile, each piece at its planned time after the request was read. "
                    "Point any client at it: OpenAI base_url http://HOST:PORT/v1, Anthropic base_url "
                    "http://HOST:PORT. Runs until Ctrl-C.",
        epilog=f"Faults (--fault, or the {FAULT_HEADER} request header for one request): {faults}. "
               "Options after a comma: after=N (pieces of text before a mid-stream fault, default 3), times=N "
               "(only the first N requests), retry_after=S (sent with an HTTP fault). "
               "Example: --fault http=429,retry_after=1,times=2")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000; 0 picks a free one)")
    source = serve.add_argument_group("what to stream", "a recording's lane, or else a synthetic profile")
    source.add_argument("--recording", type=Path, metavar="FILE", help="stream a lane of this recording")
    source.add_argument("--lane", default="0", metavar="N|NAME", help="the recording's lane: index or tier name")
    source.add_argument("--run", type=int, default=0, metavar="N", help="the recording's run (default 0)")
    source.add_argument("--ttft-ms", type=float, default=300.0, metavar="MS", help="synthetic: time to first token")
    source.add_argument("--tok-s", type=float, default=750.0, metavar="N", help="synthetic: tokens per second")
    source.add_argument("--jitter", type=float, default=0.0, metavar="X", help="synthetic: relative jitter (0.1)")
    source.add_argument("--seed", type=int, default=0, help="synthetic: random seed")
    source.add_argument("--tokens-per-event", type=int, default=1, metavar="N", help="synthetic: tokens per chunk")
    source.add_argument("--thinking-tokens", type=int, default=0, metavar="N",
                        help="synthetic: reasoning tokens before the answer")
    source.add_argument("--text", help="synthetic: the answer to stream (default: the built-in passage)")
    source.add_argument("--model", default="tokrace-serve", help="the model name /v1/models lists")
    serve.add_argument("--speed", type=float, default=1.0, metavar="X", help="play X times faster (default 1)")
    serve.add_argument("--fault", metavar="SPEC", help="inject a fault into every request (see below)")
    serve.add_argument("--no-usage", action="store_true",
                       help="never send usage on Chat Completions (like servers that ignore include_usage)")
    serve.add_argument("--flavor", choices=FLAVORS, default="openai",
                       help="which server a Chat stream imitates: its reasoning field and its own timing "
                            "(groq x_groq.usage, cerebras time_info, llamacpp timings)")
    serve.add_argument("--max-body", type=_megabytes, default=MAX_BODY, metavar="MB",
                       help="the largest request body taken, in MB (default 32); a larger one is answered 413")
    serve.add_argument("--report-tier", metavar="TIER",
                       help="the service tier to say was used (default: the one asked for)")


def _megabytes(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of MB, got {text!r}") from None
    if not 0 < value <= 4096:
        raise argparse.ArgumentTypeError(f"expected above 0 and at most 4096 MB, got {text}")
    return int(value * 1024 * 1024)


@dataclass(slots=True)
class ServeOptions:
    """``tokrace serve``'s settings, gathered from its command line."""

    host: str = "127.0.0.1"
    port: int = 8000
    recording: Path | None = None
    lane: int | str = 0
    run: int = 0
    profile: dict[str, Any] = field(default_factory=dict)
    model: str = "tokrace-serve"
    speed: float = 1.0
    fault: str | None = None
    usage: bool = True
    flavor: str = "openai"
    report_tier: str | None = None
    max_body: int = MAX_BODY


def build_server(opts: ServeOptions, on_served: Callable[[Served], None] | None = None) -> ServeServer:
    """A server for the options (not yet listening); bad options are one-line errors."""
    if opts.recording is not None:
        source: Source = RecordingSource(opts.recording, opts.lane, opts.run)
    else:
        try:
            source = SyntheticSource(Profile.from_options(opts.profile), opts.model)
        except ConfigError as exc:
            raise ServeError(f"bad profile: {exc}") from None
    fault = Fault.parse(opts.fault) if opts.fault else None
    return ServeServer(source, fault=fault, speed=opts.speed, usage=opts.usage, flavor=opts.flavor,
                       report_tier=opts.report_tier, on_served=on_served, limits=Limits(max_body=opts.max_body))


async def serve_forever(server: ServeServer, opts: ServeOptions, say: Callable[[str], None]) -> None:
    """Listen until cancelled (Ctrl-C), saying where, and one line per request served."""
    try:
        await server.start(opts.host, opts.port)
    except OSError as exc:
        raise ServeError(f"cannot listen on {opts.host}:{opts.port} ({exc.strerror}); "
                         "pick another --port") from None
    say(f"tokrace serve: streaming {server.source.describe()}")
    say(f"  OpenAI base_url    {server.url}/v1   (provider openai or openai-responses)")
    say(f"  Anthropic base_url {server.url}      (provider anthropic)")
    say("  Ctrl-C stops")
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C, one line on stderr per request served."""
    profile: dict[str, Any] = {"ttft_ms": args.ttft_ms, "tok_s": args.tok_s, "jitter": args.jitter,
                               "seed": args.seed, "tokens_per_event": args.tokens_per_event,
                               "thinking_tokens": args.thinking_tokens}
    if args.text:
        profile["text"] = args.text
    lane: int | str = int(args.lane) if args.lane.isdigit() else args.lane
    opts = ServeOptions(host=args.host, port=args.port, recording=args.recording, lane=lane, run=args.run,
                        profile=profile, model=args.model, speed=args.speed, fault=args.fault,
                        usage=not args.no_usage, flavor=args.flavor, report_tier=args.report_tier,
                        max_body=args.max_body)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def served(record: Served) -> None:
        took = f"ttft {record.ttft_s * 1000:.0f} ms, {record.tokens} tokens" if record.ttft_s is not None else ""
        fault = f" [{record.fault}]" if record.fault else ""
        say(f"{record.request_id} {record.path} {record.status} {took}{fault}")

    server = build_server(opts, on_served=served)
    try:
        asyncio.run(serve_forever(server, opts, say))
    except KeyboardInterrupt:
        say("tokrace serve: stopped")
    return 0
