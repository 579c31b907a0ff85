"""Writing exports: the text of every format made from a race's events and metrics, the theme's colours for the
HTML report, and the output file (or stdout) with one clear message when it cannot be written. Shared by
``tokrace export``, ``bench --markdown/--csv`` and the screen's "Export…" (the screen's own pictures are drawn in
:mod:`tokrace.tui.app.export_media`, which this module never imports, so the screen can import it)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tokrace.providers.model.errors import TokraceError

if TYPE_CHECKING:
    from tokrace.providers.export.race_data import ExportSource
    from tokrace.providers.recording import Recording


class ExportError(TokraceError):
    """An export that cannot be made or written."""


def html_colours(theme: str | None) -> dict[str, str]:
    """The colours of the theme for the HTML report: ``theme``, else the one chosen last, else the default."""
    from tokrace.themes.plain import theme_colours, theme_files

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
    """An export made from the race's events and metrics (every format but the screen's own), with every key the
    tiers could use, and anything shaped like a credential, masked as in recordings (a prompt or an error message
    of a live run may quote one)."""
    from tokrace.providers.model.masking import redact
    from tokrace.providers.recording import secret_values

    return redact(_render(source, to, turns, colours), secret_values(source.tiers))


def _render(source: ExportSource, to: str, turns: bool, colours: dict[str, str] | None) -> str:
    if to == "markdown":
        from tokrace.providers.export.markdown import to_markdown

        return to_markdown(source)
    if to == "csv":
        from tokrace.providers.export.csv_table import to_csv

        return to_csv(source, turns)
    if to == "html":
        from tokrace.providers.export.html_report import to_html

        return to_html(source, colours)
    if to == "otlp":
        from tokrace.providers.export.otlp import to_otlp_json

        return to_otlp_json(source)
    raise ExportError(f"{to} is drawn by the screen, not from the metrics")


def keep_spaces(svg: str) -> str:
    """Mark the SVG's whitespace as significant: without it some viewers (librsvg, and so many image previews)
    drop the space a run of text starts with, shifting the run left and gluing its words to the run before."""
    return svg.replace("<svg ", '<svg xml:space="preserve" ', 1)


async def export_text(recording: Recording, to: str, *, run: int | None = None, turns: bool = False,
                      theme: str | None = None, what_if: float | None = None, name: str | None = None) -> str:
    """An export of a recording made from its replayed events and metrics (every format but SVG and cast);
    ``name`` is the file to name as its source when it is not the recording itself."""
    from tokrace.providers.export.race_data import replay_recording
    from tokrace.providers.metrics.loop import WHAT_IF_FACTOR

    source = await replay_recording(recording, run, what_if=what_if or WHAT_IF_FACTOR)
    if name is not None:
        source.file = name
    return render(source, to, turns=turns, colours=html_colours(theme) if to == "html" else None)


TABLE_EXPORTS: Final[tuple[str, ...]] = ("markdown", "csv", "html")
"""What ``bench`` (and ``replay --headless``) can write beside its table and its JSON."""


def add_table_exports(p: argparse.ArgumentParser) -> None:
    """``--markdown FILE|-``, ``--csv FILE|-`` and ``--html FILE|-`` on a command that prints bench's table."""
    p.add_argument("--markdown", metavar="FILE|-", help="also write the results as GitHub-flavoured Markdown "
                   "(bench's table, the bottleneck table of a loop, the summary) to FILE, or to stdout with -")
    p.add_argument("--csv", metavar="FILE|-", help="also write the results as CSV (one row per tier and run, the "
                   "metric names as headers) to FILE, or to stdout with -")
    p.add_argument("--html", metavar="FILE|-", help="also write the results as one self-contained HTML page (as "
                   "tokrace export --to html; under --concurrency, the table and a plot against the streams) to "
                   "FILE, or to stdout with -")


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
    """Write each export asked for (Markdown, CSV, HTML) of a finished run."""
    for fmt, target in exports.items():
        write_output(render(source, fmt), target, fmt)
