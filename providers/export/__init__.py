"""Layer 9, exports: a race as Markdown, CSV, an HTML report or OpenTelemetry JSON, and bench's tables.

Each format is one module reading events and metrics (:mod:`.race_data` turns a recording into them, by the code
``tokrace replay --headless`` runs); the screen's own pictures (SVG, asciicast) are drawn by the app in ``tui``.
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
