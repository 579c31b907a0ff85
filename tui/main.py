"""The ``tokrace`` command: the command line, handed the race screen so that it never imports Textual itself.

The command line and the screen load on first use: ``tokrace --version`` imports nothing but the version."""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cli.parser import EXIT_FAILED, EXIT_OK, EXIT_USAGE, build_parser

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]

VERSION_ONLY = (["--version"],)
"""Command lines answered before the parser (and every command's module) is imported."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tokrace ARGV`` (the process's arguments when ``None``); the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args in VERSION_ONLY:
        from tokrace.providers import __version__

        print(f"tokrace {__version__}")
        return 0
    from tokrace.providers.runs.heap import fix_mmap_threshold

    fix_mmap_threshold()  # before any huge event: its blocks go back to the system when freed
    gc.disable()  # what the command line imports lives as long as the process: nothing to look through for garbage
    try:
        from .app.launch import AppScreen
        from .cli import main as cli
    finally:
        gc.enable()
    return cli.main(argv, AppScreen())


def __getattr__(name: str) -> Any:
    """The parser's names, imported when first asked for (see the module's docstring)."""
    if name in ("EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "build_parser"):
        from .cli import parser

        return getattr(parser, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    sys.exit(main())
