"""The ``tokrace`` command line: parse arguments, load config, hand off to the TUI or a headless runner.

Every user error becomes one line on stderr and exit code 2; a failed run is exit 1. Heavy imports (Textual,
tiktoken, httpx) happen only inside the command that needs them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokrace.providers import __version__
from tokrace.providers.model.errors import TokraceError
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec

from .signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated

if TYPE_CHECKING:
    from tokrace.providers.config.load import Config
    from tokrace.providers.loop.scenario import Scenario
    from tokrace.providers.runs.record_paths import RecordPlan
    from tokrace.providers.voice.lens import VoiceSettings
    from tokrace.providers.voice.speak import Speaker

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MAX_RUNS = 10_000
"""The most runs ``--runs`` takes (every run's events are kept for the report)."""
MAX_NUMBER = 1e7
"""The largest number an option takes (speeds, seconds, rates): anything above is a typo."""


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


def _max_tokens(text: str) -> int:
    from tokrace.providers.model.tiers import MAX_TOKENS_LIMIT

    value = _positive_int(text)
    if value > MAX_TOKENS_LIMIT:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_TOKENS_LIMIT:,} (tokrace's limit), got {value:,}")
    return value


def _runs(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_RUNS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_RUNS:,} runs, got {value:,}")
    return value


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or abs(value) > MAX_NUMBER:
        raise argparse.ArgumentTypeError(f"expected a number up to {MAX_NUMBER:g}, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def _add_voice_options(p: argparse.ArgumentParser) -> None:
    voice = p.add_argument_group("voice lens", "when would a voice start speaking, and would it run dry?")
    voice.add_argument("--voice", action="store_true",
                       help="add the voice lens: a table (and a voice object per run in --json); on the race "
                            "screen, start with the voice lens on (the key v toggles it)")
    voice.add_argument("--wpm", type=_positive_float, metavar="N",
                       help="speaking rate in words per minute (default 165; implies --voice)")
    voice.add_argument("--tts-delay", type=_non_negative_float, metavar="MS",
                       help="text-to-speech delay from a complete sentence to its audio (default 200; "
                            "implies --voice)")
    voice.add_argument("--speak", metavar="CMD",
                       help="pipe each completed sentence of one lane to a text-to-speech command as it "
                            "completes, e.g. --speak espeak-ng (or say, or a piper pipeline)")
    voice.add_argument("--speak-lane", metavar="NAME",
                       help="the tier to speak with --speak (default: the first)")


def _voice(args: argparse.Namespace) -> VoiceSettings | None:
    from tokrace.providers.voice.lens import DEFAULT_TTS_DELAY_S, DEFAULT_WPM, VoiceSettings

    if not (args.voice or args.wpm is not None or args.tts_delay is not None):
        return None
    delay = args.tts_delay / 1000.0 if args.tts_delay is not None else DEFAULT_TTS_DELAY_S
    return VoiceSettings(wpm=args.wpm if args.wpm is not None else DEFAULT_WPM, tts_delay_s=delay)


def _speaker(args: argparse.Namespace, tiers: Sequence[TierSpec]) -> Speaker | None:
    """The --speak listener, checked before the race: the command must exist and the lane must be a tier."""
    import shlex
    import shutil

    from tokrace.providers.voice.speak import Speaker

    if args.speak is None:
        if args.speak_lane is not None:
            raise UsageError("--speak-lane needs --speak CMD (the text-to-speech command)")
        return None
    try:
        argv = shlex.split(args.speak)
    except ValueError as exc:
        raise UsageError(f"--speak: cannot read the command {args.speak!r} ({exc})") from None
    if not argv:
        raise UsageError("--speak: the text-to-speech command is empty")
    if shutil.which(argv[0]) is None:
        raise UsageError(f"--speak: no command {argv[0]!r} found; install a text-to-speech program "
                         "(espeak-ng, say, piper) or name one that is installed")
    lane = 0
    if args.speak_lane is not None:
        names = [t.name.lower() for t in tiers]
        if args.speak_lane.lower() not in names:
            raise UsageError(f"--speak-lane: no tier named {args.speak_lane!r} in this race "
                             f"(tiers: {', '.join(t.name for t in tiers)})")
        lane = names.index(args.speak_lane.lower())
    return Speaker(argv, lane)


def _add_race_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, metavar="FILE", help="config file (default: ./tokrace.toml, then the "
                   "user config dir; the built-in offline demo when there is none)")
    p.add_argument("--tiers", metavar="NAME,NAME", help="race only these tiers of the config")
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", metavar="TEXT", help="the prompt to race (default: the config's)")
    prompt.add_argument("--prompt-file", type=Path, metavar="FILE", help="read the prompt from a file")
    p.add_argument("--max-tokens", type=_max_tokens, metavar="N", help="output token limit per turn (at most 200,000)")
    p.add_argument("--scenario", metavar="NAME|FILE",
                   help="race a whole agent loop instead of one prompt: a built-in (see tokrace scenarios) "
                        "or a scenario TOML file")


def _add_warm_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warm", action="store_true",
                   help="open each HTTP tier's connection before the start, so no lane pays for its connect")


def _add_reads_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exact-reads", action="store_true",
                   help="read every packet of an HTTP stream on its own, however fast they come (by default, "
                        "above ~500 packets a second they are read every 16 ms: less CPU, and that turn's "
                        "inter-token gaps show as not measured); also [defaults] or a tier's exact_reads = true")


def _add_presenter_options(p: argparse.ArgumentParser) -> None:
    show = p.add_argument_group("presenting", "for a room reading the screen from the back")
    show.add_argument("--present", action="store_true",
                      help="the presenter's view: gauges and timeline only (no answer text), taller bars, each "
                           "lane's final time, no notices, no footer; the projector theme unless --theme says")
    show.add_argument("--no-podium", action="store_true",
                      help="no finish line when a race ends (by default a podium with the ranking, the times and "
                           "the speed-up shows over the lanes until any key)")


def _add_theme_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--theme", metavar="NAME", help="colour theme for this run (see `tokrace themes`; the "
                   "theme last chosen in the command palette otherwise)")


def _add_record_options(p: argparse.ArgumentParser, screen: bool) -> None:
    rec = p.add_mutually_exclusive_group()
    if screen:
        rec.add_argument("--record", type=Path, metavar="FILE",
                         help="record the first race to FILE (replacing it) and each race after it to the next "
                              "free FILE-2, FILE-3, ... (default: a new file per race in the recordings folder; "
                              "see `tokrace locate`)")
        rec.add_argument("--no-record", action="store_true", help="do not record the races")
        return
    rec.add_argument("--record", type=Path, metavar="FILE",
                     help="record the session to FILE (default: a new file in the recordings folder; see "
                          "`tokrace locate`)")
    rec.add_argument("--no-record", action="store_true", help="do not record this session")


def _record_plan(args: argparse.Namespace) -> RecordPlan | None:
    """Where the screen records its races: ``None`` with ``--no-record``."""
    from tokrace.providers.runs.record_paths import RecordPlan

    return None if getattr(args, "no_record", False) else RecordPlan(getattr(args, "record", None))


def _add_wide_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wide", action="store_true", help="tables at their full width even in a terminal (as when "
                   "piped): nothing wraps; in a terminal too narrow for a table, each row is printed as a block")


def _add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=_runs, default=1, metavar="N",
                   help="race N times one after the other and report p50/p90 (default 1)")
    p.add_argument("--json", metavar="FILE|-", dest="json_target",
                   help="write the results as JSON to FILE, or to stdout with -")
    p.add_argument("--fast-forward", action="store_true",
                   help="run synthetic and replay tiers on virtual time: the same numbers, no waiting")


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The commands, where options given before the command count as the command's (argparse would reset them
    to its defaults): ``tokrace --theme projector demo`` is ``tokrace demo --theme projector``. Given again after
    the command, the later one wins; one the command does not take is bad usage, never silently dropped."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        before = {key: value for key, value in vars(namespace).items() if key != self.dest}
        super().__call__(parser, namespace, values, option_string)
        name = values[0]
        command = self._name_parser_map[name]
        takes = {action.dest: action for action in command._actions}
        for key, value in before.items():
            if key not in takes:
                flag = next(a.option_strings[0] for a in parser._actions if a.dest == key and a.option_strings)
                if name == "web":  # web hands its tabs the arguments that follow it, never those before it
                    parser.error(f"{flag} before `web`: put the tabs' options after it (tokrace web {flag} ...)")
                parser.error(f"{flag} does not apply to `tokrace {name}`")
            if getattr(namespace, key) == takes[key].default:
                setattr(namespace, key, value)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tokrace",
        description="Race LLM tiers side by side and see where the time goes. With no command, opens the race "
                    "on the configured tiers (or the built-in offline demo); piped, prints the bench table. Each "
                    "command takes its own options (tokrace COMMAND --help).",
        argument_default=argparse.SUPPRESS)  # the race options below are the screen's; a command has its own
    parser.add_argument("--version", action="version", version=f"tokrace {__version__}")
    _add_race_options(parser)
    _add_warm_option(parser)
    _add_reads_option(parser)
    _add_theme_option(parser)
    _add_presenter_options(parser)
    _add_record_options(parser, screen=True)
    _add_voice_options(parser)
    parser.register("action", "parsers", _Commands)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="the race screen on the built-in offline demo tiers",
                          description="Open the race screen on the built-in offline demo: three synthetic Sol "
                                      "tiers, no keys, no network. Piped, prints the bench table instead.")
    demo_prompt = demo.add_mutually_exclusive_group()
    demo_prompt.add_argument("--prompt", metavar="TEXT", help="the prompt to race (default: the demo's)")
    demo_prompt.add_argument("--prompt-file", type=Path, metavar="FILE", help="read the prompt from a file")
    demo.add_argument("--max-tokens", type=_max_tokens, metavar="N",
                      help="output token limit per turn (at most 200,000)")
    demo.add_argument("--scenario", metavar="NAME|FILE", help="race a whole agent loop on the demo tiers")
    demo.add_argument("--tiers", metavar="NAME,NAME", help="race only these demo tiers")
    _add_theme_option(demo)
    _add_presenter_options(demo)
    _add_record_options(demo, screen=True)
    _add_voice_options(demo)

    bench = sub.add_parser("bench", help="headless race: print a table (or JSON) and exit",
                           description="Race the tiers headless and print a table, or JSON with --json. "
                                       "Exit 0 when every run succeeded, 1 when one failed, 2 on bad usage.")
    _add_race_options(bench)
    _add_output_options(bench)
    _add_wide_option(bench)
    _add_record_options(bench, screen=False)
    _add_warm_option(bench)
    _add_reads_option(bench)
    from .export_files import add_table_exports

    add_table_exports(bench)
    bench.add_argument("--what-if", type=_positive_float, default=14.0, metavar="N", dest="what_if",
                       help="with a scenario: how long the loop would take with a model N times faster "
                            "(default 14)")
    _add_voice_options(bench)

    replay = sub.add_parser("replay", help="replay a recording or an agent trace with its original timing",
                            description="Replay every lane of a recording with its original timing: in a "
                                        "terminal on the race screen (pause, step, faster, slower, restart; a "
                                        "replay is never recorded again), else (or with --headless) as bench's "
                                        "table or JSON. An agent trace (see `tokrace traces`) plays as a lane "
                                        "per trace in the file, its idle cap (default 600 s) cutting away time.")
    replay.add_argument("file", type=Path, metavar="FILE|NAME",
                        help="a recording (.jsonl) or an agent trace, or the name of a recording in the "
                             "recordings folder (see `tokrace recordings`), or the start of that name when only "
                             "one begins so")
    replay.add_argument("--speed", type=_positive_float, default=1.0, metavar="X",
                        help="play X times faster (default 1); only the waiting changes, every figure stays the "
                             "recording's")
    replay.add_argument("--idle-cap", type=_positive_float, metavar="S",
                        help="play every pause longer than S seconds (where no lane has anything to show) in S "
                             "seconds; only the waiting changes, every figure stays the recording's")
    replay.add_argument("--headless", action="store_true", help="no screen: print bench-style output (also "
                        "when stdout is not a terminal)")
    replay.add_argument("--run", type=int, metavar="N", help="replay only run N of a multi-run recording")
    replay.add_argument("--json", metavar="FILE|-", dest="json_target", help="with --headless: JSON output")
    replay.add_argument("--fast-forward", action="store_true", help="with --headless: virtual time, no waiting")
    _add_wide_option(replay)
    add_table_exports(replay)
    _add_voice_options(replay)
    _add_theme_option(replay)
    _add_presenter_options(replay)
    from .traces_compare import add_replay_on_options

    add_replay_on_options(replay)

    recordings = sub.add_parser("recordings", help="list recordings", description="List recordings, newest first.")
    recordings.add_argument("--dir", type=Path, metavar="DIR", help="folder to list (default: the recordings "
                            "folder in the user data dir)")
    _add_wide_option(recordings)

    tiers = sub.add_parser("tiers", help="list the configured tiers and presets",
                           description="The configured tiers with their endpoints and whether each key "
                                       "variable is set (never the key), then the presets.")
    tiers.add_argument("--config", type=Path, metavar="FILE", help="config file (default: ./tokrace.toml, then "
                       "the user config dir; the built-in offline demo when there is none)")
    _add_wide_option(tiers)

    scenarios = sub.add_parser("scenarios", help="list the built-in scenarios (agent loops)",
                               description="The built-in scenarios for --scenario NAME: model requests, tools and "
                                           "people. --scenario FILE takes your own (the format is in the README).")
    _add_wide_option(scenarios)

    sub.add_parser("themes", help="list the themes and any broken theme files",
                   description="One line per theme: its name and where it comes from (built-in or a file in "
                               "the themes folder of the user config dir), then every broken theme file with "
                               "its problem. Exit 1 when a theme file is broken.")

    from .export import add_export_parser
    from .locate import add_locate_parser
    from .serve import add_serve_parser
    from .traces import add_traces_parser
    from .web import add_web_parser

    add_serve_parser(sub)
    add_locate_parser(sub)
    add_export_parser(sub)
    add_traces_parser(sub)
    from .calibrate import add_calibrate_parser

    add_calibrate_parser(sub, _positive_int)
    add_web_parser(sub, _positive_int)
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


def _configured_race(args: argparse.Namespace) -> tuple[Config, list[TierSpec], Scenario | None, TurnRequest]:
    """The config, its tiers (``--tiers``), the scenario and the request that ``tokrace`` and ``bench`` race."""
    from tokrace.providers.config.load import exact_reads, load_config

    config = load_config(args.config)
    tiers = config.select(args.tiers)
    if getattr(args, "exact_reads", False):
        tiers = exact_reads(tiers)
    scenario = _scenario(args, config.defaults.scenario)
    request = _request(args, config.defaults.prompt, config.defaults.max_tokens)
    if args.max_tokens:  # the command line wins over every tier's own limit (in a loop: caps every request)
        tiers = [dataclasses.replace(tier, max_tokens=args.max_tokens if scenario else None) for tier in tiers]
    if scenario is not None:
        request.prompt = scenario.first_prompt()
    return config, tiers, scenario, request


def cmd_bench(args: argparse.Namespace) -> int:
    from tokrace.providers.recording.file import default_path

    from .export_files import table_exports
    from .headless import run_headless

    config, tiers, scenario, request = _configured_race(args)
    voice, speaker = _voice(args), _speaker(args, tiers)
    slug = scenario.name if scenario is not None else request.prompt
    record = None if args.no_record else (args.record or default_path(slug))
    return run_headless(tiers, request, runs=args.runs, fast_forward=args.fast_forward, record=record,
                        prompt=request.prompt, json_target=args.json_target, warm=args.warm,
                        stall_threshold_s=config.defaults.stall_threshold_ms / 1000.0,
                        voice=voice, speaker=speaker, scenario=scenario, what_if=args.what_if,
                        exports=table_exports(args))


def _scenario(args: argparse.Namespace, default: str | None) -> Scenario | None:
    """The scenario to race: --scenario, else the config's (unless a prompt was given on the command line)."""
    from tokrace.providers.loop.scenario_file import load_scenario

    prompted = bool(getattr(args, "prompt", None) or getattr(args, "prompt_file", None))
    if args.scenario and prompted:
        raise UsageError("--scenario and --prompt both say what to race; give one of them")
    name = args.scenario or (None if prompted else default)
    return load_scenario(name) if name else None


def cmd_replay(args: argparse.Namespace) -> int:
    if getattr(args, "on", None) is not None:
        from .traces_compare import replay_on

        return replay_on(args, _replay)
    from tokrace.providers.recording.file import recordings_dir

    from .find_recording import find_recording
    from .traces import replayable

    args.file = find_recording(args.file, recordings_dir())
    # an agent trace (Claude Code, Codex, OTLP, WEKA) plays as a recording made from it; its idle cap is spent
    # cutting away time, so the replay itself runs uncapped
    with replayable(args.file, args.idle_cap) as (file, converted):
        if converted:
            args.idle_cap = None
        return _replay(args, file)


def _replay(args: argparse.Namespace, file: Path, caption: str | None = None) -> int:
    from tokrace.providers.adapters.replay import replay_pace, replay_tiers
    from tokrace.providers.recording.file import read_recording

    recording = read_recording(file)
    if args.run is not None and not 0 <= args.run < recording.runs:
        raise UsageError(f"{args.file}: no run {args.run} (it has {recording.runs})")
    if not args.headless and _on_screen():
        from ..app.launch import run_replay

        # The screen's playback clock applies the speed (the user changes it) and the idle cap; the lanes play the
        # recorded times, so every figure is the recording's.
        tiers = replay_tiers(recording, run=args.run)
        return run_replay(recording, tiers, args.speed, args.idle_cap, args.run, theme=args.theme,
                          voice=_voice(args), speaker=_speaker(args, tiers), caption=caption,
                          podium=not args.no_podium, present=args.present)
    from .export_files import table_exports
    from .headless import run_headless

    runs = recording.runs if args.run is None else 1
    tiers = replay_tiers(recording, run=args.run)
    scenario = recording.header.get("scenario")
    if caption is not None and args.json_target != "-":
        print(caption)
    return run_headless(tiers, TurnRequest(prompt=recording.prompt), runs=runs, fast_forward=args.fast_forward,
                        record=None, prompt=recording.prompt, json_target=args.json_target,
                        voice=_voice(args), speaker=_speaker(args, tiers),
                        loop=str(scenario) if scenario else None,
                        pace=replay_pace(recording, args.speed, args.idle_cap, args.run),
                        paced=_paced_note(args.speed, args.idle_cap), exports=table_exports(args))


def _paced_note(speed: float, idle_cap: float | None) -> str | None:
    """What a headless replay says about its pacing: it waited less, and every figure is still the recording's."""
    parts = ([f"played ×{speed:g}"] if speed != 1.0 else []) + (
        [f"idle pauses over {idle_cap:g} s played in {idle_cap:g} s"] if idle_cap is not None else [])
    return f"replay {', '.join(parts)}: only the waiting changed, every figure is the recording's" if parts else None


def cmd_recordings(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from tokrace.providers.recording.file import list_recordings, recordings_dir

    from . import tables

    folder = args.dir or recordings_dir()
    infos = list_recordings(folder)
    console = tables.console()
    if not infos:
        console.print(f"no recordings in {folder}", highlight=False)
        return EXIT_OK
    table = Table(title=f"recordings in {folder}", title_justify="left")
    for col in ("when", "prompt", "tiers", "duration", "file"):  # the prompt may be cut, with an ellipsis
        table.add_column(col, no_wrap=col in ("when", "duration", "file"))
    for info in infos:  # every cell comes from a file: drawn as it is, never read as markup
        if info.problem:
            table.add_row("?", f"[red]{escape(info.problem)}[/]", "", "", escape(info.path.name))
            continue
        prompt = info.prompt if len(info.prompt) <= 60 else info.prompt[:59] + "…"
        table.add_row(escape(info.created.replace("T", " ")[:19]), escape(prompt), escape(", ".join(info.tiers)),
                      f"{info.duration:.1f} s" if info.duration is not None else "", escape(info.path.name))
    tables.print_table(console, table)
    return EXIT_OK


def cmd_tiers(args: argparse.Namespace) -> int:
    import os

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from tokrace.providers.config.load import load_config
    from tokrace.providers.model.masking import mask_url, redact
    from tokrace.providers.model.presets import PRESETS

    from . import tables

    config = load_config(args.config)
    console = tables.console()
    source = "built-in offline demo (no config found)" if config.source is None else str(config.source)
    table = Table(title=f"tiers from {source}", title_justify="left")
    for col in ("name", "provider", "model", "endpoint", "key"):
        table.add_column(col, no_wrap=col != "key")
    for tier in config.tiers:
        if tier.provider in ("synthetic", "replay"):
            endpoint, key = ("offline", "not needed")
        else:
            from tokrace.providers.adapters.http.provider import HTTPProvider
            from tokrace.providers.adapters.registry import create_provider

            provider = create_provider(tier)  # an HTTP provider knows its endpoint and its default key variable
            http = provider if isinstance(provider, HTTPProvider) else None
            endpoint = mask_url(http.endpoint() if http is not None else tier.base_url or "")
            key_env = http.key_env if http is not None else tier.api_key_env
            present = "set" if key_env and os.environ.get(key_env) else "[red]not set[/]"
            key = f"{key_env} {present}" if key_env else "not needed"
        table.add_row(escape(tier.name), escape(tier.provider), escape(tier.model), escape(endpoint), key)
    tables.print_table(console, table)
    for broken in config.broken:  # the others still race (with --tiers); these are refused when selected
        # the error may echo a misplaced key back (a key given where a table belongs)
        Console(stderr=True).print(f"tokrace: {redact(str(broken.error), ())}", style="red", markup=False,
                                   highlight=False)
    presets = Table(title="presets (use preset = \"name\" in a tier)", title_justify="left")
    for col in ("preset", "protocol", "base URL", "key variable"):
        presets.add_column(col, no_wrap=True)
    for name, preset in PRESETS.items():
        presets.add_row(name, preset.provider, preset.base_url, preset.api_key_env or "none")
    tables.print_table(console, presets)
    return EXIT_USAGE if config.broken else EXIT_OK


def cmd_scenarios(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tokrace.providers.loop.scenario import HumanStep
    from tokrace.providers.loop.scenario_file import builtin_scenarios

    from . import tables

    table = Table(title="built-in scenarios (--scenario NAME)", title_justify="left")
    for col, justify in (("name", "left"), ("what happens", "left"), ("model requests", "right"),
                         ("tools", "left"), ("people", "right")):
        table.add_column(col, justify=justify, no_wrap=col in ("name", "model requests", "people"))  # type: ignore[arg-type]
    for sc in builtin_scenarios():
        people = sum(1 for step in sc.steps if isinstance(step, HumanStep))
        table.add_row(sc.name, sc.description, str(sc.model_steps), ", ".join(sc.tools), str(people))
    tables.print_table(tables.console(), table)
    return EXIT_OK


def cmd_themes(args: argparse.Namespace) -> int:
    from tokrace.themes.loader import load_themes

    catalog = load_themes()
    width = max(len(name) for name in catalog.themes)
    for name, loaded in catalog.themes.items():
        print(f"{name:<{width}}  {loaded.origin}")
    if not catalog.problems:
        return EXIT_OK
    print("\nbroken theme files:")
    for problem in catalog.problems:
        print(problem)
    return EXIT_FAILED


RACE_KEYS = ("config", "tiers", "prompt", "prompt_file", "max_tokens", "scenario", "record", "no_record",
             "voice", "wpm", "tts_delay", "speak", "speak_lane", "warm", "exact_reads")
"""The options ``tokrace`` takes without a command (as ``bench`` does)."""


def cmd_race(args: argparse.Namespace) -> int:
    """``tokrace`` alone: the race screen on the configured tiers (or the demo); piped, the bench table."""
    if not _on_screen():
        bench = build_parser().parse_args(["bench"])
        bench.__dict__.update({key: getattr(args, key) for key in RACE_KEYS if hasattr(args, key)})
        return cmd_bench(bench)
    from ..app.launch import run_race

    for key in RACE_KEYS:
        if not hasattr(args, key):
            setattr(args, key, None)
    config, tiers, scenario, request = _configured_race(args)
    return run_race(tiers, request, scenario, theme=getattr(args, "theme", None),
                    configured_theme=config.defaults.theme, record=_record_plan(args), voice=_voice(args),
                    speaker=_speaker(args, tiers), warm=bool(args.warm), podium=not getattr(args, "no_podium", False),
                    present=bool(getattr(args, "present", False)))


def cmd_demo(args: argparse.Namespace) -> int:
    """The race on the built-in demo tiers: on screen in a terminal, else the bench table (recorded as bench's)."""
    from tokrace.providers.config.demo import DEMO_MAX_TOKENS, DEMO_PROMPT
    from tokrace.providers.config.load import Config

    tiers = Config(source=None).select(args.tiers)  # a config without a file races the demo tiers
    scenario = _scenario(args, None)
    request = _request(args, DEMO_PROMPT, DEMO_MAX_TOKENS)
    if scenario is not None:
        request.prompt = scenario.first_prompt()
    if not _on_screen():
        from tokrace.providers.recording.file import default_path

        from .headless import run_headless

        slug = scenario.name if scenario is not None else request.prompt
        record = None if args.no_record else (args.record or default_path(slug))
        return run_headless(tiers, request, runs=1, fast_forward=False, record=record, prompt=request.prompt,
                            json_target=None, scenario=scenario, voice=_voice(args), speaker=_speaker(args, tiers))
    from ..app.launch import run_race

    return run_race(tiers, request, scenario, theme=args.theme, record=_record_plan(args), voice=_voice(args),
                    speaker=_speaker(args, tiers), podium=not args.no_podium, present=args.present)


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve import cmd_serve as serve

    return serve(args)


def cmd_export(args: argparse.Namespace) -> int:
    from .export import cmd_export as export

    return export(args)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from .calibrate import cmd_calibrate as calibrate

    return calibrate(args)


def cmd_web(args: argparse.Namespace) -> int:
    from .web import serve_web

    return serve_web(args, check_screen_args)


SCREEN_COMMANDS = (None, "demo", "replay")
"""The commands that open the race screen, and so the ones ``tokrace web`` serves."""


def check_screen_args(argv: Sequence[str]) -> None:
    """Raise a one-line error unless ``tokrace ARGV`` opens the race screen with everything it names loading:
    ``tokrace web`` checks its tabs' arguments once, before serving, rather than failing in every tab."""
    from tokrace.providers.adapters.replay import replay_tiers
    from tokrace.providers.recording.file import read_recording, recordings_dir
    from tokrace.themes.loader import load_themes

    from ..app.launch import check_lanes
    from ..app.theming import check_theme
    from .find_recording import find_recording
    from .traces import replayable

    try:
        args = build_parser().parse_args(argv)  # argparse says what is wrong
    except SystemExit as exc:
        if exc.code:
            print("tokrace web: every argument but --host, --port, --max-tabs and --public-url goes to the tokrace "
                  "each tab runs (see tokrace --help)", file=sys.stderr)
        raise
    command = getattr(args, "command", None)
    if command not in SCREEN_COMMANDS:
        raise UsageError(f"`tokrace {command}` has no race screen to serve; tokrace web serves `tokrace`, "
                         "`tokrace demo` or `tokrace replay FILE`, with their options")
    if getattr(args, "record", None) is not None:
        raise UsageError("--record FILE: every browser tab would write the same file; leave it out (each race is "
                         "recorded to its own file in the recordings folder) or give --no-record")
    if getattr(args, "theme", None):
        check_theme(args.theme, load_themes())
    if command == "replay":
        if args.headless or args.json_target or args.fast_forward:
            raise UsageError("replay --headless, --json and --fast-forward have no screen to serve")
        args.file = find_recording(args.file, recordings_dir())
        with replayable(args.file, args.idle_cap) as (file, _):  # a recording, or an agent trace made into one
            recording = read_recording(file)
        if args.run is not None and not 0 <= args.run < recording.runs:
            raise UsageError(f"{args.file}: no run {args.run} (it has {recording.runs})")
        tiers = replay_tiers(recording, run=args.run)
    elif command == "demo":
        from tokrace.providers.config.load import Config

        tiers = Config(source=None).select(args.tiers)
        _scenario(args, None)
        _request(args, "", 1)
    else:
        for key in RACE_KEYS:
            if not hasattr(args, key):
                setattr(args, key, None)
        _, tiers, _, _ = _configured_race(args)
    check_lanes(tiers)
    _speaker(args, tiers)


def _on_screen() -> bool:
    """Whether a screen is there to draw on: a terminal, or a Textual driver named in ``TEXTUAL_DRIVER`` (as
    textual-serve does for each browser tab of ``tokrace web``, whose output is a pipe to the browser)."""
    return sys.stdout.isatty() or bool(os.environ.get("TEXTUAL_DRIVER"))


def cmd_locate(args: argparse.Namespace) -> int:
    from .locate import cmd_locate as locate

    return locate(args)


def cmd_traces(args: argparse.Namespace) -> int:
    from .traces import cmd_traces as traces

    return traces(args)


COMMANDS = {
    "bench": cmd_bench,
    "demo": cmd_demo,
    "replay": cmd_replay,
    "recordings": cmd_recordings,
    "tiers": cmd_tiers,
    "scenarios": cmd_scenarios,
    "themes": cmd_themes,
    "serve": cmd_serve,
    "locate": cmd_locate,
    "export": cmd_export,
    "traces": cmd_traces,
    "calibrate": cmd_calibrate,
    "web": cmd_web,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "web":
        args.tokrace_args = extra  # every argument `web` does not take is for the tokrace each tab runs
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from . import tables

    tables.set_wide(bool(getattr(args, "wide", False)))
    try:
        return COMMANDS[args.command](args) if args.command else cmd_race(args)
    except TokraceError as exc:
        from tokrace.providers.model.masking import redact

        print(f"tokrace: {redact(str(exc), ())}", file=sys.stderr)  # a value echoed back may be a misplaced key
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("tokrace: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print("tokrace: terminated", file=sys.stderr)
        return EXIT_TERMINATED


if __name__ == "__main__":
    sys.exit(main())
