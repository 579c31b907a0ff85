"""``tokrace proxy``: the command-line shell over :mod:`tokrace.providers.proxy`: relay an agent's calls, record them,
and at the end show where the session's time went (and, with ``--on``, what it would have taken on other tiers)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import shlex
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from tokrace.providers.model.errors import ConfigError, TokraceError
from tokrace.providers.model.masking import redact
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.proxy import Routes, Upstream
from tokrace.providers.proxy.book import CallRecord
from tokrace.providers.proxy.live import LiveProxy
from tokrace.providers.proxy.session import ProxySession
from tokrace.providers.proxy.shadow import Shadow
from tokrace.providers.traces.retime import TierProfile

from .screen import Screen
from .signals import install

DEFAULT_PORT: Final[int] = 8787


def add_proxy_parser(sub: Any) -> None:
    """The ``proxy`` subcommand."""
    p = sub.add_parser(
        "proxy", help="record a real agent's calls at the socket and see where its session's time went",
        description="Relay an agent's model calls byte for byte (Anthropic Messages, OpenAI Chat and Responses) "
                    "to their provider, measure each at the socket (time to first token, every chunk, usage, stop "
                    "reason), record the session as a tokrace recording (which `tokrace traces` and `tokrace "
                    "replay` read), and when it ends print where its time went: model, tool, human, retry. "
                    "Point the agent's base URL at the proxy, or give the agent's command after --.",
        epilog="Examples: tokrace proxy -- claude -p 'fix the failing test'   |   tokrace proxy --on 'Sol ultrafast' "
               "-- codex exec 'add a test'   |   tokrace proxy --upstream http://127.0.0.1:8000 (a tokrace serve)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT}; 0 "
                   "picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback only; "
                   "another address lets others on the network use your session, and warns)")
    p.add_argument("--upstream", metavar="anthropic|openai|URL|TIER",
                   help="where to forward: by default /v1/messages to api.anthropic.com and the OpenAI paths to "
                        "api.openai.com; a URL or a configured tier (its base_url, and its key in place of the "
                        "client's) takes every path")
    rec = p.add_mutually_exclusive_group()
    rec.add_argument("--record", type=Path, metavar="FILE", help="record the session to FILE (default: a new "
                     "file in the recordings folder; see `tokrace locate`)")
    rec.add_argument("--no-record", action="store_true", help="keep no recording (the closing report is still "
                     "printed)")
    p.add_argument("--on", metavar="TIER,TIER", help="at the end, re-time the session on these tiers (config or "
                   "demo tiers) and print the verdict, as `tokrace traces --on` does")
    p.add_argument("--headless", action="store_true", help="no live screen: print a line per call and, at the end, "
                   "the session's table and verdict (the default when stdout is not a terminal, or with -- COMMAND, "
                   "whose agent has the terminal). Ctrl-C ends it; the exit code is the agent's, else 0")
    p.add_argument("--shadow", metavar="TIER", help="also send each model call to this configured tier (its "
                   "base_url and key, its model in place of the agent's) and race its answers beside the agent's on "
                   "lanes of their own, recorded; the agent only ever sees its own answers. It costs money: every "
                   "call is paid twice")
    p.add_argument("--config", type=Path, metavar="FILE", help="config file with the tiers (default: "
                   "./tokrace.toml, then the user config dir; the built-in demo tiers when there is none)")
    p.add_argument("agent", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS",
                   help="start this agent with its base URL pointed at the proxy, and stop when it ends")


def routes_for(upstream: str | None, config_path: Path | None) -> Routes:
    """The upstreams ``--upstream`` asks for."""
    if upstream is None:
        return Routes.default()
    defaults = Routes.default()
    if upstream == "anthropic":
        return Routes.single(defaults.anthropic)
    if upstream == "openai":
        return Routes.single(defaults.openai)
    if "://" in upstream:
        return Routes.single(Upstream.parse(upstream))
    return Routes.single(tier_upstream(upstream, config_path, "--upstream"))


def configured_tier(name: str, config_path: Path | None, option: str) -> TierSpec:
    """A configured (or demo) tier by name, or a one-line error naming the tiers there are."""
    from tokrace.providers.config.load import load_config

    config = load_config(config_path)
    tier = next((t for t in config.tiers if t.name == name), None)
    if tier is None:
        names = ", ".join(t.name for t in config.tiers)
        what = "not anthropic, openai, a URL or" if option == "--upstream" else "not"
        raise ConfigError(f"{option} {name!r}: {what} a configured tier ({names})")
    return tier


def tier_upstream(name: str, config_path: Path | None, option: str) -> Upstream:
    """A configured tier as an upstream: its base_url, and its key in place of the client's."""
    from tokrace.providers.model.presets import DEFAULT_KEY_ENV

    tier = configured_tier(name, config_path, option)
    if not tier.base_url and tier.provider not in ("anthropic", "openai", "openai-responses"):
        raise ConfigError(f"{option} {name!r}: the tier has no base_url to forward to")
    defaults = Routes.default()
    base = tier.base_url or (defaults.anthropic.public() if tier.provider == "anthropic" else
                             defaults.openai.public())
    env = tier.api_key_env or DEFAULT_KEY_ENV.get(tier.provider)
    key = os.environ.get(env, "") if env else ""
    if env and not key:
        raise ConfigError(f"{option} {name!r}: its key variable {env} is not set")
    auth = (("x-api-key", key),) if tier.provider == "anthropic" else (("Authorization", f"Bearer {key}"),)
    return Upstream.parse(base, tier.name, auth if key else ())


def shadow_for(name: str | None, config_path: Path | None) -> Shadow | None:
    """``--shadow TIER``: where each call's copy goes, and which calls it can take."""
    if name is None:
        return None
    from tokrace.providers.proxy.shadow import PROTOCOLS

    tier = configured_tier(name, config_path, "--shadow")
    if tier.provider not in PROTOCOLS:
        raise ConfigError(f"--shadow {name!r}: a {tier.provider} tier cannot take an agent's calls (it needs "
                          "provider anthropic, openai or openai-responses)")
    return Shadow(tier.name, tier_upstream(name, config_path, "--shadow"), PROTOCOLS[tier.provider], tier.model)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def setup_lines(url: str) -> list[str]:
    """Exactly what to set for each agent to go through the proxy at ``url``."""
    return [
        f"tokrace proxy: listening on {url}",
        "  Claude Code   ANTHROPIC_BASE_URL=" + url + " claude",
        "  Codex         codex -c model_provider=tokrace -c 'model_providers.tokrace={name=\"tokrace proxy\", "
        f"base_url=\"{url}/v1\", env_key=\"OPENAI_API_KEY\", wire_api=\"responses\", supports_websockets=false}}'",
        f"  aider         OPENAI_API_BASE={url}/v1 aider   (or ANTHROPIC_BASE_URL={url})",
        f"  opencode      \"provider\": {{\"<id>\": {{\"options\": {{\"baseURL\": \"{url}/v1\"}}}}}} in opencode.json",
        f"  SDKs          OPENAI_BASE_URL={url}/v1   ANTHROPIC_BASE_URL={url}",
        "  Ctrl-C stops and prints where the session's time went",
    ]


def agent_env(url: str) -> dict[str, str]:
    """The environment an agent started by the proxy gets: every base URL variable pointed at it."""
    return {**os.environ, "ANTHROPIC_BASE_URL": url, "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_BASE": f"{url}/v1"}


def agent_command(command: list[str], url: str) -> list[str]:
    """The agent's command; Codex gets a provider that points at the proxy (Responses, no websocket)."""
    if command and Path(command[0]).name == "codex":
        provider = (f'model_providers.tokrace={{name="tokrace proxy", base_url="{url}/v1", '
                    'env_key="OPENAI_API_KEY", wire_api="responses", supports_websockets=false}')
        return [command[0], "-c", "model_provider=tokrace", "-c", provider, *command[1:]]
    return command


def call_line(call: CallRecord, number: int) -> str:
    ttft = f"first byte {(call.first_byte - call.start) * 1000:.0f} ms, " if call.first_byte is not None else ""
    who = f"session {number}"
    if " · shadow " in call.session:  # a shadow's copy: named for its tier
        who = call.session.rsplit(" · ", 1)[1]
    return (f"{who} lane {call.lane + 1} {call.model or '?'}: {call.status or '-'} {call.finish or ''} "
            f"({ttft}{call.end - call.start:.2f} s)")


async def start(session: ProxySession, host: str, port: int) -> None:
    """Listen, or say in one line why not."""
    try:
        await session.start(host, port)
    except OSError as exc:
        raise TokraceError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --port") from None


class CallLines:
    """Says a line for each call as it ends (once)."""

    def __init__(self, session: ProxySession, say: Callable[[str], None]) -> None:
        self.book = session.book
        self.say = say
        self.shown = 0

    def __call__(self) -> None:
        book = self.book
        for call in book.calls[self.shown:]:
            self.say(call_line(call, book.sessions.get(call.session, 0)))
        self.shown = len(book.calls)


async def follow(session: ProxySession, say: Callable[[str], None]) -> int:
    """The live screen's companion: a line per call as it ends, until the screen stops the proxy."""
    lines = CallLines(session, say)
    while True:
        await asyncio.sleep(0.2)
        lines()


async def run_proxy(session: ProxySession, host: str, port: int, command: list[str],
                    say: Callable[[str], None]) -> int:
    """Listen; run the agent (if any) until it ends, else until Ctrl-C (or SIGTERM, SIGHUP: the agent is then
    stopped too); the agent's exit code (0 without one)."""
    await start(session, host, port)
    url = session.server.url
    show_calls = CallLines(session, say)
    stopped = asyncio.Event()
    remove = install(lambda code: stopped.set())
    try:
        if not command:
            for line in setup_lines(url):
                say(line)
            while not stopped.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopped.wait(), 0.2)
                show_calls()
            say("tokrace proxy: stopped")
            return 0
        say(f"tokrace proxy: {url} — starting {redact(shlex.join(command), ())}")  # (a key may be an argument)
        try:
            process = await asyncio.create_subprocess_exec(*agent_command(command, url), env=agent_env(url))
        except OSError as exc:
            raise TokraceError(f"cannot start {command[0]!r} ({exc.strerror or exc})") from None
        try:
            while process.returncode is None and not stopped.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), 0.2)
                show_calls()
        finally:
            if process.returncode is None:  # a signal stopped the proxy: the agent is asked to stop too
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
                await process.wait()
        return process.returncode or 0
    finally:
        remove()
        await asyncio.sleep(0.05)  # the last call's measuring, which runs just after its bytes went on
        show_calls()
        await session.close()


async def run_live(session: ProxySession, live: LiveProxy, host: str, port: int, screen: Screen,
                   theme: str | None) -> int:
    """Listen, and show the session live until the person quits; the screen's exit code."""
    await start(session, host, port)
    url = session.server.url
    try:
        hint = "\n".join(setup_lines(url)[1:])  # (the heading says where it listens)
        return await screen.watch_proxy(live, session.now, f"tokrace proxy · {url}", hint,
                                        lambda say: follow(session, say), theme=theme)
    finally:
        await asyncio.sleep(0.05)  # the last call's measuring
        await session.close()


def live_screen(args: argparse.Namespace, command: list[str], screen: Screen | None) -> bool:
    """Whether the live screen shows: stdout is a terminal, no --headless, no agent command (it has the terminal)."""
    return screen is not None and not args.headless and not command and sys.stdout.isatty()


def cmd_proxy(args: argparse.Namespace, screen: Screen | None = None) -> int:
    """Relay and record until the agent ends (or Ctrl-C), then print the session's report."""
    command = list(args.agent)
    if command[:1] == ["--"]:
        command = command[1:]
    if not 0 <= args.port <= 65535:
        raise TokraceError(f"--port {args.port}: expected 0 to 65535")
    routes = routes_for(args.upstream, args.config)
    shadow = shadow_for(args.shadow, args.config)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if shadow is not None:
        say(f"tokrace proxy: --shadow {shadow.name}: every model call is sent a second time, to {shadow.name} "
            f"({shadow.upstream.public()}, model {shadow.model or 'as asked'}): it costs money on that account")
    if not is_loopback(args.host):
        say(f"tokrace proxy: warning: listening on {args.host}, not loopback: anyone who can reach it can send "
            "requests through it (with their own keys)")
    scratch: tempfile.TemporaryDirectory[str] | None = None
    if args.no_record:
        scratch = tempfile.TemporaryDirectory(prefix="tokrace-proxy-")
        path = Path(scratch.name) / "session.jsonl"
    else:
        from tokrace.providers.recording.paths import default_path

        path = args.record or default_path("proxy")
    code = 0
    profiles = on_profiles(args.on, args.config)
    if live_screen(args, command, screen):
        assert screen is not None
        live = LiveProxy(profiles)
        session = ProxySession(routes, path, listeners=[live], shadow=shadow)
        run = run_live(session, live, args.host, args.port, screen, getattr(args, "theme", None))
    else:
        session = ProxySession(routes, path, shadow=shadow)
        run = run_proxy(session, args.host, args.port, command, say)
    try:
        code = asyncio.run(run)
        if session.problem:
            say(f"tokrace proxy: {session.problem}")
        for note in session.notes:
            say(f"tokrace proxy: {note}")
        if not session.book.calls:
            say("tokrace proxy: no model call went through the proxy")
            return code
        if not args.no_record:
            say(f"tokrace proxy: recorded {len(session.book.calls)} call(s) to {path}")
        report = report_args(path, args.on, args.config)
        from .traces import cmd_traces

        cmd_traces(report)
        return code
    finally:
        if scratch is not None:
            scratch.cleanup()


def on_profiles(on: str | None, config: Path | None) -> list[TierProfile]:
    """The ``--on`` tiers' speed profiles (checked before the proxy listens)."""
    if not on:
        return []
    from tokrace.providers.config.load import load_config

    from .traces_compare import profiles_for

    return profiles_for(load_config(config), on)


def report_args(path: Path, on: str | None, config: Path | None) -> argparse.Namespace:
    """``tokrace traces PATH [--on TIERS]``'s arguments, for the closing report."""
    from tokrace.providers.traces.analysis import IDLE_CAP_S

    return argparse.Namespace(paths=[path], json_target=None, idle_cap=IDLE_CAP_S, trace_format=None,
                              original_price=None, on=on, markdown=None, csv_target=None,
                              config=config if on else None, seed=None)
