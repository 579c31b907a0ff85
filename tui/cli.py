"""The ``tokrace`` command line: parse arguments, load config, hand off to the TUI or a headless runner.

Every user error becomes one line on stderr and exit code 2; a failed run is exit 1. Heavy imports (Textual,
tiktoken, httpx) happen only inside the command that needs them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from providers import __version__
from providers.base import TokraceError, TurnRequest

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(TokraceError):
    """The command line asks for something that cannot be done."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {value}")
    return value


def _add_race_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, metavar="FILE", help="config file (default: ./tokrace.toml, then the "
                   "user config dir; the built-in offline demo when there is none)")
    p.add_argument("--tiers", metavar="NAME,NAME", help="race only these tiers of the config")
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", metavar="TEXT", help="the prompt to race (default: the config's)")
    prompt.add_argument("--prompt-file", type=Path, metavar="FILE", help="read the prompt from a file")
    p.add_argument("--max-tokens", type=_positive_int, metavar="N", help="output token limit per turn")


def _add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=_positive_int, default=1, metavar="N",
                   help="race N times one after the other and report p50/p90 (default 1)")
    p.add_argument("--json", metavar="FILE|-", dest="json_target",
                   help="write the results as JSON to FILE, or to stdout with -")
    p.add_argument("--fast-forward", action="store_true",
                   help="run synthetic and replay tiers on virtual time: the same numbers, no waiting")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tokrace",
        description="Race LLM tiers side by side and see where the time goes. With no command, opens the race "
                    "on the configured tiers (or the built-in offline demo).")
    parser.add_argument("--version", action="version", version=f"tokrace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    bench = sub.add_parser("bench", help="headless race: print a table (or JSON) and exit",
                           description="Race the tiers headless and print a table, or JSON with --json. "
                                       "Exit 0 when every run succeeded, 1 when one failed, 2 on bad usage.")
    _add_race_options(bench)
    _add_output_options(bench)
    rec = bench.add_mutually_exclusive_group()
    rec.add_argument("--record", type=Path, metavar="FILE",
                     help="record the session to FILE (default: a new file in the recordings folder)")
    rec.add_argument("--no-record", action="store_true", help="do not record this session")
    bench.add_argument("--warm", action="store_true", help="open connections before the start")

    replay = sub.add_parser("replay", help="replay a recording with its original timing",
                            description="Replay every lane of a recording with its original timing.")
    replay.add_argument("file", type=Path, metavar="FILE", help="a recording (.jsonl)")
    replay.add_argument("--speed", type=_positive_float, default=1.0, metavar="X",
                        help="play X times faster (default 1)")
    replay.add_argument("--idle-cap", type=_positive_float, metavar="S",
                        help="shorten every pause longer than S seconds to S")
    replay.add_argument("--headless", action="store_true", help="no screen: print bench-style output")
    replay.add_argument("--run", type=int, metavar="N", help="replay only run N of a multi-run recording")
    replay.add_argument("--json", metavar="FILE|-", dest="json_target", help="with --headless: JSON output")
    replay.add_argument("--fast-forward", action="store_true", help="with --headless: virtual time, no waiting")

    recordings = sub.add_parser("recordings", help="list recordings", description="List recordings, newest first.")
    recordings.add_argument("--dir", type=Path, metavar="DIR", help="folder to list (default: the recordings "
                            "folder in the user data dir)")

    tiers = sub.add_parser("tiers", help="list the configured tiers and presets",
                           description="The configured tiers with their endpoints and whether each key "
                                       "variable is set (never the key), then the presets.")
    tiers.add_argument("--config", type=Path, metavar="FILE", help="config file")
    return parser


def _request(args: argparse.Namespace, defaults_prompt: str, defaults_max: int) -> TurnRequest:
    prompt = defaults_prompt
    if getattr(args, "prompt", None):
        prompt = args.prompt
    elif getattr(args, "prompt_file", None):
        try:
            prompt = Path(args.prompt_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UsageError(f"{args.prompt_file}: cannot read the prompt ({exc.strerror})") from None
        if not prompt:
            raise UsageError(f"{args.prompt_file}: the prompt file is empty")
    return TurnRequest(prompt=prompt, max_tokens=getattr(args, "max_tokens", None) or defaults_max)


def cmd_bench(args: argparse.Namespace) -> int:
    from providers.config import load_config
    from providers.recording import default_path

    from .headless import run_headless

    config = load_config(args.config)
    tiers = config.select(args.tiers)
    request = _request(args, config.defaults.prompt, config.defaults.max_tokens)
    for tier in tiers:
        if tier.max_tokens is not None and not args.max_tokens:
            request.max_tokens = min(request.max_tokens, tier.max_tokens) if len(tiers) > 1 else tier.max_tokens
    record = None if args.no_record else (args.record or default_path(request.prompt))
    return run_headless(tiers, request, runs=args.runs, fast_forward=args.fast_forward, record=record,
                        prompt=request.prompt, json_target=args.json_target, warm=args.warm,
                        stall_threshold_s=config.defaults.stall_threshold_ms / 1000.0)


def cmd_replay(args: argparse.Namespace) -> int:
    from providers.recording import read_recording
    from providers.replay import replay_tiers

    recording = read_recording(args.file)
    if not args.headless:
        raise UsageError("the replay screen is not available yet; use --headless")
    from .headless import run_headless

    if args.run is not None and not 0 <= args.run < recording.runs:
        raise UsageError(f"{args.file}: no run {args.run} (it has {recording.runs})")
    runs = recording.runs if args.run is None else 1
    tiers = replay_tiers(recording, args.speed, args.idle_cap, run=args.run)
    return run_headless(tiers, TurnRequest(prompt=recording.prompt), runs=runs, fast_forward=args.fast_forward,
                        record=None, prompt=recording.prompt, json_target=args.json_target)


def cmd_recordings(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from providers.recording import list_recordings, recordings_dir

    folder = args.dir or recordings_dir()
    infos = list_recordings(folder)
    console = Console()
    if not infos:
        console.print(f"no recordings in {folder}", highlight=False)
        return EXIT_OK
    table = Table(title=f"recordings in {folder}", title_justify="left")
    for col in ("when", "prompt", "tiers", "duration", "file"):
        table.add_column(col, overflow="fold" if col == "file" else "ellipsis")
    for info in infos:
        if info.problem:
            table.add_row("?", f"[red]{info.problem}[/]", "", "", info.path.name)
            continue
        prompt = info.prompt if len(info.prompt) <= 60 else info.prompt[:59] + "…"
        table.add_row(info.created.replace("T", " ")[:19], prompt, ", ".join(info.tiers),
                      f"{info.duration:.1f} s" if info.duration is not None else "", info.path.name)
    console.print(table)
    return EXIT_OK


def cmd_tiers(args: argparse.Namespace) -> int:
    import os

    from rich.console import Console
    from rich.table import Table

    from providers.config import load_config
    from providers.presets import PRESETS

    config = load_config(args.config)
    console = Console()
    source = "built-in offline demo (no config found)" if config.source is None else str(config.source)
    table = Table(title=f"tiers from {source}", title_justify="left")
    for col in ("name", "provider", "model", "endpoint", "key"):
        table.add_column(col)
    for tier in config.tiers:
        if tier.provider in ("synthetic", "replay"):
            endpoint, key = ("offline", "not needed")
        else:
            endpoint = tier.base_url or ""
            if tier.api_key_env:
                key = f"{tier.api_key_env} {'set' if os.environ.get(tier.api_key_env) else '[red]not set[/]'}"
            else:
                key = "not needed"
        table.add_row(tier.name, tier.provider, tier.model, endpoint, key)
    console.print(table)
    presets = Table(title="presets (use preset = \"name\" in a tier)", title_justify="left")
    for col in ("preset", "protocol", "base URL", "key variable"):
        presets.add_column(col)
    for name, preset in PRESETS.items():
        presets.add_row(name, preset.provider, preset.base_url, preset.api_key_env or "none")
    console.print(presets)
    return EXIT_OK


COMMANDS = {
    "bench": cmd_bench,
    "replay": cmd_replay,
    "recordings": cmd_recordings,
    "tiers": cmd_tiers,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command or "bench"
    try:
        return COMMANDS[command](args) if args.command else cmd_bench(parser.parse_args(["bench"]))
    except TokraceError as exc:
        print(f"tokrace: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("tokrace: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
