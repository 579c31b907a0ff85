"""The ``tokrace`` command: the command line, handed the race screen so that it never imports Textual itself."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .app.launch import AppScreen
from .cli import main as cli
from .cli.parser import EXIT_FAILED, EXIT_OK, EXIT_USAGE, build_parser

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tokrace ARGV`` (the process's arguments when ``None``); the exit code."""
    return cli.main(argv, AppScreen())


if __name__ == "__main__":
    sys.exit(main())
