"""The ``tokrace`` command line's arguments: every command's options, their checks, and one-line usage errors."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, Final, NoReturn

from tokrace.providers import __version__
from tokrace.providers.model.errors import TokraceError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
"""Exit codes: every run went well, a run failed, the command line asked for what cannot be done."""


MAX_RUNS = 10_000
"""The most runs ``--runs`` takes (every run's events are kept for the report)."""


MAX_NUMBER = 1e7
"""The largest number an option takes (speeds, seconds, rates): anything above is a typo."""


MAX_STREAMS = 256
"""The most streams per tier ``--concurrency`` takes (as the engine's ``runs.load.MAX_CONCURRENCY``)."""
MAX_LEVELS = 16
"""The most levels one ``--concurrency`` sweep takes (as the engine's ``runs.load.MAX_POINTS``)."""


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


def _levels(text: str) -> tuple[int, ...]:
    """``--concurrency``'s value: a number of streams, or a comma-separated list for a sweep."""
    parts = [p.strip() for p in text.split(",")]
    out: list[int] = []
    for part in parts:
        try:
            n = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of streams or a list like 1,4,16,64; got "
                                             f"{text!r}") from None
        if not 1 <= n <= MAX_STREAMS:
            raise argparse.ArgumentTypeError(f"expected 1 to {MAX_STREAMS} streams, got {n}")
        if n in out:
            raise argparse.ArgumentTypeError(f"{n} is given twice")
        out.append(n)
    if len(out) > MAX_LEVELS:
        raise argparse.ArgumentTypeError(f"at most {MAX_LEVELS} levels, got {len(out)}")
    return tuple(out)


def _add_load_options(p: argparse.ArgumentParser) -> None:
    load = p.add_argument_group("load", "continuous load on each tier instead of one race: N streams per tier, "
                                "each sending its next request when its last ends")
    load.add_argument("--concurrency", type=_levels, metavar="N[,N...]",
                      help="streams per tier (one connection each); a list (1,4,16,64) sweeps the levels in turn "
                           f"and reports each (at most {MAX_STREAMS} streams)")
    end = load.add_mutually_exclusive_group()
    end.add_argument("--requests", type=_positive_int, metavar="M",
                     help="with --concurrency: send M requests per tier at each level (default: 4 per stream)")
    end.add_argument("--duration", type=_positive_float, metavar="S",
                     help="with --concurrency: send for S seconds at each level; requests under way then finish "
                          "and count")


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


COMMAND_MODULES: Final[frozenset[str]] = frozenset({"serve", "proxy", "locate", "export", "traces", "calibrate",
                                                     "web"})
"""The commands whose options their own module declares: building them imports that module and what it imports
(the proxy, the trace readers, the server, httpx), so a command line that cannot name one is parsed without them."""


class _WholeParser(Exception):
    """The parser without the command modules' commands has something to print: the whole parser prints it."""


class _CoreParser(argparse.ArgumentParser):
    """A parser of the commands a command line names alone: it parses, and hands help and usage errors (which name
    every command) to the whole parser."""

    def error(self, message: str) -> NoReturn:
        raise _WholeParser

    def print_help(self, *args: Any, **kwargs: Any) -> None:
        raise _WholeParser

    def print_usage(self, *args: Any, **kwargs: Any) -> None:
        raise _WholeParser


def parse_command_line(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """``parse_known_args`` of the whole parser, building only the commands an argument names (argparse takes a
    command only by its whole name), so importing no command module it does not name: ``tokrace demo`` opens sooner
    (without bench's options and their modules), and ``tokrace traces`` starts its workers without the proxy's and
    the server's modules."""
    if argv is None:
        argv = sys.argv[1:]
    try:
        return _build(_CoreParser, COMMANDS.intersection(argv)).parse_known_args(argv)
    except _WholeParser:
        pass
    return build_parser().parse_known_args(argv)


def build_parser() -> argparse.ArgumentParser:
    """Every command's options."""
    return _build(argparse.ArgumentParser, COMMANDS)


def _build(kind: type[argparse.ArgumentParser], commands: Collection[str]) -> argparse.ArgumentParser:
    """The parser of ``kind``, with the options of ``commands`` alone (and those of no command)."""
    parser = kind(
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
    _add_load_options(parser)
    parser.register("action", "parsers", _Commands)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for name, add in CORE_COMMANDS.items():
        if name in commands:
            add(sub)

    if "serve" in commands:
        from .serve import add_serve_parser

        add_serve_parser(sub)
    if "proxy" in commands:
        from .proxy import add_proxy_parser

        add_proxy_parser(sub)
    if "locate" in commands:
        from .locate import add_locate_parser

        add_locate_parser(sub)
    if "export" in commands:
        from .export import add_export_parser

        add_export_parser(sub)
    if "traces" in commands:
        from .traces import add_traces_parser

        add_traces_parser(sub)
    if "calibrate" in commands:
        from .calibrate import add_calibrate_parser

        add_calibrate_parser(sub, _positive_int)
    if "web" in commands:
        from .web import add_web_parser

        add_web_parser(sub, _positive_int)
    return parser


def _add_demo(sub: Any) -> None:
    """``tokrace demo`` and its options."""
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


def _add_bench(sub: Any) -> None:
    """``tokrace bench`` and its options."""
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
    _add_load_options(bench)


def _add_replay(sub: Any) -> None:
    """``tokrace replay`` and its options."""
    from .export_files import add_table_exports

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


def _add_recordings(sub: Any) -> None:
    """``tokrace recordings`` and its options."""
    recordings = sub.add_parser("recordings", help="list recordings", description="List recordings, newest first.")
    recordings.add_argument("--dir", type=Path, metavar="DIR", help="folder to list (default: the recordings "
                            "folder in the user data dir)")
    _add_wide_option(recordings)


def _add_tiers(sub: Any) -> None:
    """``tokrace tiers`` and its options."""
    tiers = sub.add_parser("tiers", help="list the configured tiers and presets",
                           description="The configured tiers with their endpoints and whether each key "
                                       "variable is set (never the key), then the presets.")
    tiers.add_argument("--config", type=Path, metavar="FILE", help="config file (default: ./tokrace.toml, then "
                       "the user config dir; the built-in offline demo when there is none)")
    _add_wide_option(tiers)


def _add_scenarios(sub: Any) -> None:
    """``tokrace scenarios`` and its options."""
    scenarios = sub.add_parser("scenarios", help="list the built-in scenarios (agent loops)",
                               description="The built-in scenarios for --scenario NAME: model requests, tools and "
                                           "people. --scenario FILE takes your own (the format is in the README).")
    _add_wide_option(scenarios)


def _add_themes(sub: Any) -> None:
    """``tokrace themes`` and its options."""
    sub.add_parser("themes", help="list the themes and any broken theme files",
                   description="One line per theme: its name and where it comes from (built-in or a file in "
                               "the themes folder of the user config dir), then every broken theme file with "
                               "its problem. Exit 1 when a theme file is broken.")


CORE_COMMANDS: Final[dict[str, Callable[[Any], None]]] = {
    "demo": _add_demo, "bench": _add_bench, "replay": _add_replay, "recordings": _add_recordings,
    "tiers": _add_tiers, "scenarios": _add_scenarios, "themes": _add_themes}
"""The commands this module declares, in the order help lists them (before the :data:`COMMAND_MODULES`')."""

COMMANDS: Final[frozenset[str]] = frozenset(CORE_COMMANDS) | COMMAND_MODULES
"""Every command."""
