"""``tokrace export FILE --to FORMAT``: a recorded race for other tools (the writers are in
:mod:`providers.export`; the screen's own pictures, SVG and asciicast, in :mod:`tui.export_screen`).

Also the shared pieces ``bench --markdown/--csv`` and the screen's "Export…" use: the theme's colours for the
HTML report, and writing an export to a file or stdout with one clear message when it cannot be written.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from providers.base import TokraceError
from providers.export import FORMATS

if TYPE_CHECKING:
    from providers.export.source import ExportSource
    from providers.recording import Recording

TEXT_FORMATS: Final[frozenset[str]] = frozenset({"markdown", "csv", "html", "svg", "cast", "otlp"})
"""Formats that can go to stdout with ``-o -`` (all of them are text)."""

SCREEN_FORMATS: Final[frozenset[str]] = frozenset({"svg", "cast"})
"""Formats drawn by the race screen itself."""


class ExportError(TokraceError):
    """An export that cannot be made or written."""


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
    p.add_argument("file", type=Path, metavar="FILE", help="a recording (.jsonl)")
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


def html_colours(theme: str | None) -> dict[str, str]:
    """The colours of the theme for the HTML report: ``theme``, else the one chosen last, else the default."""
    from themes.plain import theme_colours, theme_files

    from .settings import Settings

    name = theme
    if name is None:
        remembered = Settings().theme
        name = remembered if remembered is not None and remembered in theme_files() else "tokrace-dark"
    colours = theme_colours(name)
    if colours is None:
        raise ExportError(f"no theme named {name!r} (themes: {', '.join(theme_files())}; see `tokrace themes`)")
    return colours


def write_output(text: str, target: str, what: str) -> None:
    """Write an export to a file (made whole, then moved into place) or, for ``-``, to stdout."""
    if target == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(target)
    part = path.with_name(f".{path.name}.part")
    try:
        part.write_text(text, encoding="utf-8", newline="")
        part.replace(path)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise ExportError(f"{target}: cannot write the {what} ({exc.strerror or exc})") from None


def check_writable(target: str | None, what: str) -> None:
    """Find out before a long run that an output file cannot be written."""
    import os

    if target in (None, "-"):
        return
    folder = Path(target).parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise ExportError(f"{target}: cannot write the {what} (no writable folder {folder})")


def render(source: ExportSource, to: str, *, turns: bool = False, colours: dict[str, str] | None = None) -> str:
    """An export made from the race's events and metrics (every format but the screen's own)."""
    if to == "markdown":
        from providers.export.markdown import to_markdown

        return to_markdown(source)
    if to == "csv":
        from providers.export.csv_table import to_csv

        return to_csv(source, turns)
    if to == "html":
        from providers.export.html_report import to_html

        return to_html(source, colours)
    if to == "otlp":
        from providers.export.otlp import to_otlp_json

        return to_otlp_json(source)
    raise ExportError(f"{to} is drawn by the screen, not from the metrics")


async def export_recording(recording: Recording, to: str, *, run: int | None = None, turns: bool = False,
                           theme: str | None = None, at: float | None = None, size: tuple[int, int] | None = None,
                           what_if: float | None = None) -> str:
    """The export of a recording as text."""
    if to in SCREEN_FORMATS:
        from .export_screen import DEFAULT_SIZE, screen_cast, screen_svg
        from .theming import AppThemes

        themes = AppThemes(requested=theme)
        if to == "svg":
            return await screen_svg(recording, run=run, at=at, size=size or DEFAULT_SIZE, themes=themes)
        return await screen_cast(recording, run=run, size=size or DEFAULT_SIZE, themes=themes,
                                 title=f"tokrace: {recording.path.name}")
    from providers.export.source import replay_recording
    from providers.loop.metrics import WHAT_IF_FACTOR

    source = await replay_recording(recording, run, what_if=what_if or WHAT_IF_FACTOR)
    return render(source, to, turns=turns, colours=html_colours(theme) if to == "html" else None)


def cmd_export(args: argparse.Namespace) -> int:
    from providers.export.source import default_output
    from providers.recording import read_recording

    from .export_screen import parse_size

    _check_options(args)
    size = parse_size(args.size) if args.size is not None else None
    target = args.output or str(default_output(args.file, FORMATS[args.to]))
    if target != "-" and Path(target).resolve() == args.file.resolve():
        raise ExportError(f"{target}: that is the recording itself; name another output with -o")
    check_writable(target, f"{args.to} export")
    recording = read_recording(args.file)
    if args.run is not None and not 0 <= args.run < recording.runs:
        raise ExportError(f"{args.file}: no run {args.run} (it has {recording.runs})")
    for warning in recording.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    started = dt.datetime.now()
    text = asyncio.run(export_recording(recording, args.to, run=args.run, turns=args.turns, theme=args.theme,
                                        at=args.at, size=size, what_if=args.what_if))
    write_output(text, target, f"{args.to} export")
    if target != "-":
        took = (dt.datetime.now() - started).total_seconds()
        print(f"exported to {target} ({args.to}, {took:.1f} s)", file=sys.stderr)
    return 0


TABLE_EXPORTS: Final[tuple[str, ...]] = ("markdown", "csv")
"""What ``bench`` (and ``replay --headless``) can write beside its table and its JSON."""


def add_table_exports(p: argparse.ArgumentParser) -> None:
    """``--markdown FILE|-`` and ``--csv FILE|-`` on a command that prints bench's table."""
    p.add_argument("--markdown", metavar="FILE|-", help="also write the results as GitHub-flavoured Markdown "
                   "(bench's table, the bottleneck table of a loop, the summary) to FILE, or to stdout with -")
    p.add_argument("--csv", metavar="FILE|-", help="also write the results as CSV (one row per tier and run, the "
                   "metric names as headers) to FILE, or to stdout with -")


def table_exports(args: argparse.Namespace) -> dict[str, str]:
    """The formats asked for with :func:`add_table_exports` and where each goes."""
    return {fmt: getattr(args, fmt) for fmt in TABLE_EXPORTS if getattr(args, fmt, None) is not None}


def check_exports(exports: dict[str, str], json_target: str | None) -> None:
    """Before a run: one output at most on stdout, and every file writable."""
    to_stdout = [flag for flag, target in (("--json", json_target), *((f"--{k}", v) for k, v in exports.items()))
                 if target == "-"]
    if len(to_stdout) > 1:
        both = "both" if len(to_stdout) == 2 else "all"
        raise ExportError(f"{' and '.join(to_stdout)} {both} ask for stdout (-); send all but one to a file")
    for fmt, target in exports.items():
        check_writable(target, fmt)


def write_exports(source: ExportSource, exports: dict[str, str]) -> None:
    """Write each export asked for (Markdown, CSV) of a finished run."""
    for fmt, target in exports.items():
        write_output(render(source, fmt), target, fmt)
