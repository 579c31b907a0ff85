"""The ``tokrace`` command line: parse arguments, hand off to a command, turn errors into one line and an exit code.

Every user error becomes one line on stderr and exit code 2; a failed run is exit 1. Heavy imports (tiktoken,
httpx) happen only inside the command that needs them, and Textual only behind the :class:`.screen.Screen` the
command is handed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from tokrace.providers.model.errors import TokraceError

from .listing import cmd_recordings, cmd_scenarios, cmd_themes, cmd_tiers
from .parser import EXIT_USAGE, build_parser, parse_command_line
from .race import check_screen_args, cmd_bench, cmd_demo, cmd_race, cmd_replay
from .screen import Screen
from .signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated

Command = Callable[[argparse.Namespace, Screen], int]
"""A command: its parsed arguments and the screen in, the exit code out."""


def cmd_serve(args: argparse.Namespace, screen: Screen) -> int:
    from .serve import cmd_serve as serve

    return serve(args)


def cmd_proxy(args: argparse.Namespace, screen: Screen) -> int:
    from .proxy import cmd_proxy as proxy

    return proxy(args, screen)


def cmd_export(args: argparse.Namespace, screen: Screen) -> int:
    from .export import cmd_export as export

    return export(args, screen)


def cmd_calibrate(args: argparse.Namespace, screen: Screen) -> int:
    from .calibrate import cmd_calibrate as calibrate

    return calibrate(args)


def cmd_web(args: argparse.Namespace, screen: Screen) -> int:
    from .web import serve_web

    return serve_web(args, lambda argv: check_screen_args(argv, screen))


def cmd_locate(args: argparse.Namespace, screen: Screen) -> int:
    from .locate import cmd_locate as locate

    return locate(args)


def cmd_traces(args: argparse.Namespace, screen: Screen) -> int:
    from .traces import cmd_traces as traces

    return traces(args)


COMMANDS: dict[str, Command] = {
    "bench": cmd_bench,
    "demo": cmd_demo,
    "replay": cmd_replay,
    "recordings": cmd_recordings,
    "tiers": cmd_tiers,
    "scenarios": cmd_scenarios,
    "themes": cmd_themes,
    "serve": cmd_serve,
    "proxy": cmd_proxy,
    "locate": cmd_locate,
    "export": cmd_export,
    "traces": cmd_traces,
    "calibrate": cmd_calibrate,
    "web": cmd_web,
}
"""Each command by name; no command is the race (:func:`.race.cmd_race`)."""


def main(argv: Sequence[str] | None, screen: Screen) -> int:
    """Run ``tokrace ARGV``; the screen is what opens the race screen when a command asks for it."""
    args, extra = parse_command_line(argv)
    if args.command == "web":
        args.tokrace_args = extra  # every argument `web` does not take is for the tokrace each tab runs
    elif extra:
        build_parser().error(f"unrecognized arguments: {' '.join(extra)}")
    from . import tables

    tables.set_wide(bool(getattr(args, "wide", False)))
    try:
        return COMMANDS[args.command](args, screen) if args.command else cmd_race(args, screen)
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
