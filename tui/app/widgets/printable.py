"""Model and server text made safe to draw (the engine's one sanitiser, docs/faults.md#text-from-outside)."""

from __future__ import annotations

from tokrace.providers.model.printable import one_line, printable

__all__ = ["one_line", "printable"]
