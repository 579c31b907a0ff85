""""Export…" from the command palette: pick a format, and the race on screen is written beside its recording.

Markdown, CSV, HTML and OpenTelemetry JSON are made from the recording (as ``tokrace export`` makes them, on a
thread so the screen stays live); SVG is the screen as it is now; an asciicast replays the race on a screen of its
own, so it is made by ``tokrace export`` in a process of its own. A notification says where each went.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar, Final

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tokrace.providers.export import FORMATS
from tokrace.providers.export.race_data import default_output
from tokrace.providers.model.errors import TokraceError
from tokrace.providers.recording import read_recording
from tokrace.providers.runs.replay_control import ReplayControl
from tokrace.providers.runs.runner import RaceRunner

from ...cli.export_files import ExportError, export_text, keep_spaces, write_output

CHOICES: Final[dict[str, str]] = {
    "markdown": "Markdown: bench's table, the bottleneck table and the summary, for a pull request",
    "html": "HTML: one page with the summary, the table, the timeline (prints, projects, works offline)",
    "csv": "CSV: one row per lane, the metric names as headers",
    "svg": "SVG: the screen as it is now",
    "cast": "asciicast: the race replayed with its timing (asciinema play, the web player)",
    "otlp": "OpenTelemetry JSON: an agent span per lane, a model call per turn, a span per tool call",
}
"""What the picker offers, in its order."""


def recording_of(runner: RaceRunner, replay: ReplayControl | None) -> Path | str:
    """The recording of the race on screen, or why there is none to export."""
    if replay is not None:
        return replay.path
    if runner.running:
        return "the race is still running: export it once it ends"
    if runner.record is None:
        return "this race was not recorded (--no-record), so there is nothing to export"
    if not runner.recorded:
        return "no race has been recorded yet"
    return runner.recorded[-1]


class ExportScreen(ModalScreen[None]):
    """The formats; choosing one writes it beside the recording."""

    CSS_PATH = "export.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, recording: Path) -> None:
        super().__init__()
        self.recording = recording
        """The recording of the race on screen."""
        self.beside = beside(recording)
        """Where the exports go: beside the recording, or beside the agent trace it was made from."""

    def compose(self) -> ComposeResult:
        with Vertical(id="export"):
            yield Static(f"Export this race beside {self.beside.name}", classes="export-title", markup=False)
            yield OptionList(*(Option(text, id=fmt) for fmt, text in CHOICES.items()))
            yield Static("enter writes it · escape closes", classes="export-close")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        to = event.option.id
        if to is None:
            return
        svg = keep_spaces(self.app.export_screenshot(title="tokrace")) if to == "svg" else None
        self.dismiss()
        theme = self.app.theme
        self.app.run_worker(export_beside(self.app, self.recording, self.beside, to, svg, theme), group="export",
                            exit_on_error=False)


def beside(recording: Path) -> Path:
    """The file an export is named after and written beside: the recording, or, for a replay of an agent trace
    (a recording made in a temporary folder), the trace file it was made from."""
    from tokrace.providers.recording import RecordingError, read_header

    try:
        trace = read_header(recording).get("trace")
    except RecordingError:
        return recording
    original = Path(str(trace.get("file") or "")) if isinstance(trace, dict) else None
    return original if original is not None and original.is_file() else recording


async def export_beside(app: App[Any], recording: Path, near: Path, to: str, svg: str | None, theme: str) -> None:
    """Write one export of the recording beside ``near`` and say where (or why not) in a notification."""
    out = default_output(near, FORMATS[to])
    app.notify(f"writing {out.name}…", title="Export", markup=False, timeout=3)
    try:
        await make(recording, to, out, svg, theme, None if near == recording else str(near))
    except TokraceError as exc:
        app.notify(str(exc), title="Export failed", severity="error", markup=False)
        return
    app.notify(f"exported to {out}", title="Exported", markup=False, timeout=10)


async def make(recording: Path, to: str, out: Path, svg: str | None, theme: str, name: str | None = None) -> None:
    """The export itself: the screen's own picture, a cast in a process of its own, the rest on a thread."""
    if svg is not None:
        write_output(svg, str(out), "SVG")
        return
    if to == "cast":
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tokrace.tui.main", "export", str(recording), "--to", "cast", "--theme", theme,
            "-o", str(out), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, err = await proc.communicate()
        if proc.returncode != 0:
            lines = err.decode("utf-8", "replace").strip().splitlines()
            raise ExportError(lines[-1].removeprefix("tokrace: ") if lines else f"exit status {proc.returncode}")
        return

    def work() -> str:
        return asyncio.run(export_text(read_recording(recording), to, theme=theme if to == "html" else None,
                                       name=name))

    write_output(await asyncio.to_thread(work), str(out), f"{to} export")
