"""What leaves the program for other tools: a race as Markdown, CSV, an HTML report or OpenTelemetry JSON.

Each format is one module reading the core's events and metrics (:mod:`.source` turns a recording into them, by
the code ``tokrace replay --headless`` runs); the screen's own pictures (SVG, asciicast) are made in ``tui``.
"""

from __future__ import annotations

from typing import Final

FORMATS: Final[dict[str, str]] = {
    "markdown": "md",
    "csv": "csv",
    "html": "html",
    "svg": "svg",
    "cast": "cast",
    "otlp": "otlp.json",
}
"""Every export format, with the file suffix its output gets by default."""
