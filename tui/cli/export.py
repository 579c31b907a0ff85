"""``tokrace export FILE --to FORMAT``: a recorded race for other tools (the writers are in
:mod:`tokrace.providers.export`, the text and the files in :mod:`tokrace.tui.cli.export_files`, the screen's own
pictures, SVG and asciicast, drawn by the app behind :class:`.screen.Screen`)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tokrace.providers.export import FORMATS
from tokrace.providers.model.errors import TokraceError

from .export_files import ExportError, check_writable, export_text, write_output
from .screen import Screen

if TYPE_CHECKING:
    from tokrace.providers.recording import Recording

SCREEN_FORMATS: Final[frozenset[str]] = frozenset({"svg", "cast"})
"""Formats drawn by the race screen itself."""


def add_export_parser(sub: Any) -> None:
    """The ``export`` subcommand and its options."""
    p = sub.add_parser(
        "export", help="a recorded race as Markdown, CSV, HTML, SVG, asciicast or OpenTelemetry JSON",
        description="Write a recorded race for other tools: markdown (bench's table, the bottleneck table of a "
                    "loop and the summary, for a pull request), csv (one row per lane and run; --turns: per model "
                    "request), html (one self-contained page: summary, table, timeline, bottleneck bars; prints "
                    "and projects), svg (the race screen at its end, or --at SECONDS), cast (the race replayed "
                    "as an asciicast v3 file with its original timing, for asciinema play and the web player), "
                    "otlp (OpenTelemetry trace JSON with GenAI spans: an agent per lane, a model call per turn, a "
                    "tool span per tool call). The numbers are those of `tokrace replay FILE --headless`.",
        epilog="By default the export goes beside FILE, named like it (race.jsonl -> race.md, race.html, "
               "race.otlp.json...); -o - writes it to stdout.")
    p.add_argument("file", type=Path, metavar="FILE", help="a recording (.jsonl), or an agent trace (see `tokrace "
                   "traces`: it is exported as `tokrace replay` plays it, a lane per trace)")
    p.add_argument("--to", required=True, choices=list(FORMATS), metavar="FORMAT", dest="to",
                   help=f"the format: {', '.join(FORMATS)}")
    p.add_argument("-o", "--output", metavar="OUT|-", help="where to write it (default: beside FILE; - for stdout)")
    p.add_argument("--run", type=int, metavar="N", help="only run N of a recording of several runs (from 0)")
    p.add_argument("--turns", action="store_true", help="csv: one row per model request instead of per run")
    p.add_argument("--theme", metavar="NAME", help="html, svg, cast: the colour theme (default: the one chosen "
                   "last on the screen, else tokrace-dark; projector suits a lit room)")
    p.add_argument("--at", type=float, metavar="SECONDS", help="svg: the screen this far into the race "
                   "(default: at its end)")
    p.add_argument("--size", metavar="COLSxROWS", help="svg, cast: the terminal's size (default 160x45)")
    p.add_argument("--what-if", type=float, default=None, metavar="N", dest="what_if",
                   help="markdown, html: the bottleneck table's \"model N× faster\" (default 14)")


def _check_options(args: argparse.Namespace) -> None:
    """Options that do not apply to the format asked for are refused, not silently ignored."""
    to = args.to
    rules = [("--turns", args.turns, {"csv"}), ("--at", args.at is not None, {"svg"}),
             ("--size", args.size is not None, SCREEN_FORMATS),
             ("--theme", args.theme is not None, {"html"} | SCREEN_FORMATS),
             ("--what-if", args.what_if is not None, {"markdown", "html"})]
    for flag, given, formats in rules:
        if given and to not in formats:
            raise ExportError(f"{flag} applies to --to {' or '.join(sorted(formats))}, not {to}")
    if args.at is not None and args.at < 0:
        raise ExportError(f"--at: expected 0 or more seconds, got {args.at:g}")
    if args.what_if is not None and args.what_if <= 0:
        raise ExportError(f"--what-if: expected a number above 0, got {args.what_if:g}")


async def export_recording(recording: Recording, to: str, screen: Screen, *, run: int | None = None,
                           turns: bool = False, theme: str | None = None, at: float | None = None,
                           size: tuple[int, int] | None = None, what_if: float | None = None,
                           name: str | None = None) -> str:
    """The export of a recording as text, in any format (SVG and asciicast are drawn by the ``screen``); ``name`` is
    the file to name as its source (a trace the recording was made from)."""
    if to not in SCREEN_FORMATS:
        return await export_text(recording, to, run=run, turns=turns, theme=theme, what_if=what_if, name=name)
    lanes = len(recording.tiers) or 1 + max((lane for _, lane in recording.events), default=0)
    if lanes > screen.max_lanes:
        raise ExportError(f"{recording.path}: the screen shows up to {screen.max_lanes} lanes and this race has "
                          f"{lanes}; export it as markdown, csv, html or otlp")
    if to == "svg":
        return await screen.export_svg(recording, run=run, at=at, size=size, theme=theme)
    title = f"tokrace: {Path(name).name if name else recording.path.name}"
    if not sys.stderr.isatty():
        return await screen.export_cast(recording, run=run, size=size, theme=theme, title=title)
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from tokrace.providers.runs.replay_control import replay_duration

    with Progress(TextColumn("drawing the cast"), BarColumn(), TextColumn("{task.completed:.0f} / {task.total:.0f} s"),
                  TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("cast", total=max(replay_duration(recording, run), 0.1))
        return await screen.export_cast(recording, run=run, size=size, theme=theme, title=title,
                                        progress=lambda t: bar.update(task, completed=t))


def parse_size(text: str) -> tuple[int, int]:
    """``COLSxROWS`` (e.g. ``120x40``) as (columns, rows); a clear error otherwise."""
    cols, sep, rows = text.lower().partition("x")
    if not sep or not cols.isdecimal() or not rows.isdecimal():
        raise TokraceError(f"--size: expected COLSxROWS such as 160x45, got {text!r}")
    size = (int(cols), int(rows))
    if not (40 <= size[0] <= 500 and 12 <= size[1] <= 200):
        raise TokraceError(f"--size: {text} is outside 40x12 to 500x200")
    return size


def cmd_export(args: argparse.Namespace, screen: Screen) -> int:
    from tokrace.providers.export.race_data import default_output
    from tokrace.providers.recording import read_recording, recordings_dir

    from .find_recording import find_recording
    from .traces import replayable

    _check_options(args)
    size = parse_size(args.size) if args.size is not None else None
    given = args.file
    args.file = find_recording(given, recordings_dir())  # a recording's name, as `tokrace replay NAME` takes
    # a recording found by its name is exported to the current folder, not into the recordings folder
    beside = args.file if args.file == given else Path(args.file.name)
    target = args.output or str(default_output(beside, FORMATS[args.to]))
    if target != "-" and Path(target).resolve() == args.file.resolve():
        raise ExportError(f"{target}: that is FILE itself; name another output with -o")
    check_writable(target, f"{args.to} export")
    started = dt.datetime.now()
    # An agent trace (Claude Code, Codex, OTLP, WEKA) is exported as the recording `tokrace replay` plays of it.
    with replayable(args.file, None) as (file, converted):
        recording = read_recording(file)
        if args.run is not None and not 0 <= args.run < recording.runs:
            raise ExportError(f"{args.file}: no run {args.run} (it has {recording.runs})")
        for warning in recording.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        text = asyncio.run(export_recording(recording, args.to, screen, run=args.run, turns=args.turns,
                                            theme=args.theme, at=args.at, size=size, what_if=args.what_if,
                                            name=str(args.file) if converted else None))
    write_output(text, target, f"{args.to} export")
    if target != "-":
        took = (dt.datetime.now() - started).total_seconds()
        print(f"exported to {target} ({args.to}, {took:.1f} s)", file=sys.stderr)
    return 0
